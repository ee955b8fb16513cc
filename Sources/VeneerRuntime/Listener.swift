import Foundation
import HTTPTypes
import HummingbirdCore
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization
import VeneerConfig
import VeneerCore

/// One HTTP/1.1 listener: Hummingbird's server (binding, quiescing on graceful shutdown)
/// with Veneer's own connection pipeline, ``ProxyConnection``.
enum Listener {
    static func make(
        address: ListenAddress, edge: ProxyEdge, headerLimit: Int, idleTimeout: Duration, eventLoopGroup: any EventLoopGroup,
        logger: Logger, onBound: @escaping @Sendable (Int) async -> Void
    ) -> any Service {
        Server(
            childChannelSetup: ProxyConnection(edge: edge, headerLimit: headerLimit, dates: HTTPDateCache(), idleTimeout: TimeAmount(idleTimeout)),
            configuration: ServerConfiguration(address: .hostname(address.host, port: address.port), backlog: 1024),
            onServerRunning: { channel in await onBound(channel.localAddress?.port ?? address.port) },
            eventLoopGroup: eventLoopGroup,
            logger: logger)
    }
}

extension ClientAddress {
    /// The address of a socket peer; nil for Unix sockets. (Once per connection, so the
    /// text form is good enough.)
    init?(_ address: SocketAddress?) {
        guard let text = address?.ipAddress else { return nil }
        self.init(text)
    }
}

/// `Date` header text (RFC 9110 IMF-fixdate), formatted at most once a second.
final class HTTPDateCache: Sendable {
    private let cache = Mutex<(second: Int, text: String)>((-1, ""))

    func now() -> String {
        // time(2) is a vDSO read of the coarse clock: far cheaper than a Date per response.
        let second = time(nil)
        return cache.withLock { cache in
            if cache.second != second { cache = (second, HTTPDate.format(second)) }
            return cache.text
        }
    }
}
