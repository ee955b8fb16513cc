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
    /// Where a listener listens.
    public enum Endpoint: Sendable, CustomStringConvertible {
        /// `host`:`port` (0 picks a free port).
        case tcp(host: String, port: Int)
        /// A Unix socket Veneer creates at `path` (replacing a stale socket file, never anything
        /// else), then gives `mode` and group `groupID` when set, before it accepts anything.
        case unix(path: String, mode: UInt32?, groupID: UInt32?)
        /// A socket already listening, passed by systemd as `descriptor` (socket activation);
        /// `address` says where it listens, for messages.
        case inherited(descriptor: Int32, address: String)

        /// `127.0.0.1:8080`, `[::1]:8080` or `unix:/path`.
        public var description: String {
            switch self {
            case .tcp(let host, let port): return host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
            case .unix(let path, _, _): return "unix:\(path)"
            case .inherited(_, let address): return "\(address) (passed by systemd)"
            }
        }
    }

    /// A service that listens on `host`:`port` (0 picks a free port, which `onBound` is told)
    /// and answers through `edge`, within `limits`, until graceful shutdown.
    public static func make(
        host: String, port: Int, edge: ProxyEdge, limits: ConnectionLimits, eventLoopGroup: any EventLoopGroup,
        logger: Logger, onBound: @escaping @Sendable (Int) async -> Void
    ) -> any Service {
        make(.tcp(host: host, port: port), edge: edge, limits: limits, eventLoopGroup: eventLoopGroup, logger: logger, onBound: onBound)
    }

    /// A service that listens on `endpoint` and answers through `edge`, within `limits`, until
    /// graceful shutdown; `onBound` is told the port (0 for a Unix socket) once it accepts.
    /// `loopbackIdentity` (`peer_identity`): each loopback TCP connection's caller is asked
    /// of the kernel (its uid).
    public static func make(
        _ endpoint: Endpoint, edge: ProxyEdge, limits: ConnectionLimits, eventLoopGroup: any EventLoopGroup,
        logger: Logger, loopbackIdentity: Bool = false, onBound: @escaping @Sendable (Int) async -> Void
    ) -> any Service {
        let bound = BoundFlag()
        let failure = SetupFailure()
        let connection = ProxyConnection(edge: edge, limits: limits, dates: HTTPDateCache(), loopbackIdentity: loopbackIdentity)
        let address: BindAddress
        switch endpoint {
        case .tcp(let host, let port): address = .hostname(host, port: port)
        case .unix(let path, _, _): address = .unixDomainSocket(path: path)
        case .inherited(let descriptor, _):
            let listener = InheritedListener(descriptor: descriptor, connection: connection, eventLoopGroup: eventLoopGroup, logger: logger) { channel in
                bound.set()
                await guardAccepts(channel, connections: limits.connections, logger: logger)
                await onBound(channel.localAddress?.port ?? 0)
            }
            return NamedListener(server: listener, address: endpoint.description, bound: bound, failure: failure)
        }
        let server = Server(
            childChannelSetup: connection,
            configuration: ServerConfiguration(address: address, backlog: 1024),
            onServerRunning: { channel in
                if case .unix(let path, let mode, let groupID) = endpoint, let problem = SocketFile.apply(path: path, mode: mode, groupID: groupID) {
                    // Never serve a socket whose permissions are not the configured ones.
                    failure.set(problem)
                    try? await channel.close()
                    return
                }
                bound.set()
                await guardAccepts(channel, connections: limits.connections, logger: logger)
                await onBound(channel.localAddress?.port ?? 0)
            },
            eventLoopGroup: eventLoopGroup,
            logger: logger)
        return NamedListener(server: server, address: endpoint.description, bound: bound, failure: failure)
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
    let failure: SetupFailure

    var description: String { "the listener on \(address)" }

    func run() async throws {
        do {
            try await server.run()
            if let problem = failure.problem { throw ListenError(address: address, reason: problem) }
        } catch let error as ListenError {
            throw error
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
        case ENOENT: return "its folder does not exist"
        default:
            if error is UnixDomainSocketPathWrongType { return "the path exists and is not a socket (Veneer replaces only a stale socket file)" }
            return "\(error)"
        }
    }
}

/// Why a listener's socket was closed before it accepted anything (its permissions could not be set).
final class SetupFailure: Sendable {
    private let value = Mutex<String?>(nil)
    func set(_ problem: String) { value.withLock { $0 = problem } }
    var problem: String? { value.withLock { $0 } }
}

/// Whether a listener's socket was bound (set once, from its event loop).
final class BoundFlag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .relaxed) }
    var isSet: Bool { value.load(ordering: .relaxed) }
}
