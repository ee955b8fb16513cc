import Foundation
import HummingbirdCore
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import VeneerCore

/// One HTTP/1.1 listener: Hummingbird's server (binding, quiescing on graceful shutdown)
/// with Veneer's own connection pipeline, ``ProxyConnection``, and an ``AcceptGuardHandler``
/// on the listening socket (the `connections` limit; no spinning when out of descriptors).
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
            onServerRunning: { channel in
                await guardAccepts(channel, connections: limits.connections, logger: logger)
                await onBound(channel.localAddress?.port ?? port)
            },
            eventLoopGroup: eventLoopGroup,
            logger: logger)
    }

    /// Puts the guard first on the listening socket's pipeline, before ready is reported.
    ///
    /// Hummingbird offers no server-channel initializer, but the pipeline can change once
    /// bound. First means nearest the socket: ahead of NIO's `AcceptBackoffHandler`, which
    /// swallows accept errors, and of the quiescing helper, which must never see a refused
    /// connection. (A connection accepted in the moment before is served but not counted.)
    private static func guardAccepts(_ channel: any Channel, connections: Int, logger: Logger) async {
        do {
            try await channel.eventLoop.submit {
                try channel.pipeline.syncOperations.addHandler(AcceptGuardHandler(limit: connections, logger: logger), position: .first)
            }.get()
        } catch {
            // Only a listener that closed already gets here: nothing left to guard.
            logger.debug("listener closed before its accept guard was added", metadata: ["error": .string(ErrorText.describe(error))])
        }
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
