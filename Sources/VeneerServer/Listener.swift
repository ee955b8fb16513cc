import Foundation
import HummingbirdCore
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import VeneerCore

/// One HTTP/1.1 listener: Hummingbird's server (binding, quiescing on graceful shutdown)
/// with Veneer's own connection pipeline, ``ProxyConnection``.
public enum Listener {
    /// A service that listens on `host`:`port` (0 picks a free port, which `onBound` is told)
    /// and answers through `edge`, within `limits`, until graceful shutdown.
    public static func make(
        host: String, port: Int, edge: ProxyEdge, limits: ConnectionLimits, eventLoopGroup: any EventLoopGroup,
        logger: Logger, onBound: @escaping @Sendable (Int) async -> Void
    ) -> any Service {
        Server(
            childChannelSetup: ProxyConnection(edge: edge, limits: limits, dates: HTTPDateCache()),
            configuration: ServerConfiguration(address: .hostname(host, port: port), backlog: 1024),
            onServerRunning: { channel in await onBound(channel.localAddress?.port ?? port) },
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
