import Foundation
import HummingbirdCore
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization
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
        let bound = BoundFlag()
        let server = Server(
            childChannelSetup: ProxyConnection(edge: edge, limits: limits, dates: HTTPDateCache()),
            configuration: ServerConfiguration(address: .hostname(host, port: port), backlog: 1024),
            onServerRunning: { channel in
                bound.set()
                await guardAccepts(channel, connections: limits.connections, logger: logger)
                await onBound(channel.localAddress?.port ?? port)
            },
            eventLoopGroup: eventLoopGroup,
            logger: logger)
        return NamedListener(server: server, address: host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)", bound: bound)
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

/// A listener that could not open its socket, with the address it was given: the system
/// call's own error (`bind(descriptor:ptr:bytes:): Address already in use`) names none.
public struct ListenError: Error, Sendable, CustomStringConvertible {
    /// `host:port` as configured.
    public let address: String
    /// What went wrong, for a person.
    public let reason: String

    /// `cannot listen on 127.0.0.1:8080: the address is already in use (...)`.
    public var description: String { "cannot listen on \(address): \(reason)" }
}

/// Runs a listener; an error before it is bound becomes a ``ListenError`` naming the address.
struct NamedListener: Service, CustomStringConvertible {
    let server: any Service
    let address: String
    let bound: BoundFlag

    var description: String { "the listener on \(address)" }

    func run() async throws {
        do {
            try await server.run()
        } catch {
            guard !bound.isSet else { throw error }
            throw ListenError(address: address, reason: Self.reason(error))
        }
    }

    static func reason(_ error: any Error) -> String {
        switch (error as? IOError)?.errnoCode {
        case EADDRINUSE: return "the address is already in use (another Veneer or another server listens there; `ss -ltnp` shows which)"
        case EACCES: return "permission denied (ports below 1024 need CAP_NET_BIND_SERVICE)"
        case EADDRNOTAVAIL: return "this machine has no such address"
        default: return "\(error)"
        }
    }
}

/// Whether a listener's socket was bound (set once, from its event loop).
final class BoundFlag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .relaxed) }
    var isSet: Bool { value.load(ordering: .relaxed) }
}
