import NIOCore
import NIOPosix
import Synchronization
import VeneerCore

/// The transports the daemon uses: one per distinct ``TransportOptions``, all shut down at the end.
///
/// `.standard` sends plain `http://` requests through a ``PooledHTTP1Transport`` (the lean
/// path the proxy is measured on) and `https://` ones through AsyncHTTPClient (TLS, HTTP/2);
/// `.asyncHTTPClient` sends everything through AsyncHTTPClient.
public final class StandardTransportProvider: TransportProvider {
    /// Which client carries plain HTTP.
    public enum Kind: Sendable {
        /// ``PooledHTTP1Transport`` for `http`, AsyncHTTPClient for `https`.
        case standard
        /// AsyncHTTPClient for both.
        case asyncHTTPClient
    }

    private let transports = Mutex<[TransportOptions: SchemeTransport]>([:])
    private let eventLoopGroup: any EventLoopGroup
    private let kind: Kind
    private let metrics: UpstreamMetrics

    /// Creates a provider on `eventLoopGroup`; the pooled transports count into `metrics`.
    public init(eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, kind: Kind = .standard,
                metrics: UpstreamMetrics = .none) {
        self.eventLoopGroup = eventLoopGroup
        self.kind = kind
        self.metrics = metrics
    }

    /// The shared transport for these options.
    public func transport(_ options: TransportOptions) -> any HTTPTransport {
        transports.withLock { transports in
            if let existing = transports[options] { return existing }
            let tls = AsyncHTTPClientTransport(options: options, eventLoopGroup: eventLoopGroup)
            let plain: PooledHTTP1Transport? = kind == .standard ? PooledHTTP1Transport(options: options, eventLoopGroup: eventLoopGroup, metrics: metrics) : nil
            let made = SchemeTransport(plain: plain, tls: tls)
            transports[options] = made
            return made
        }
    }

    /// Shuts down every client.
    public func shutdown() async {
        let all = transports.withLock { transports in
            defer { transports.removeAll() }
            return Array(transports.values)
        }
        for transport in all {
            await transport.plain?.shutdown()
            try? await transport.tls.shutdown()
        }
    }
}

/// Plain HTTP through one transport, HTTPS through the other.
struct SchemeTransport: HTTPTransport {
    let plain: PooledHTTP1Transport?
    let tls: AsyncHTTPClientTransport

    func send(_ request: consuming OutboundRequest) async throws -> ProxyResponse {
        if request.endpoint.scheme == "http", let plain {
            return try await plain.send(request)
        }
        return try await tls.send(request)
    }

    func startsWithoutTask(to endpoint: Endpoint) -> Bool {
        endpoint.scheme == "http" && plain != nil
    }

    func start(_ request: consuming OutboundRequest, then done: @escaping @Sendable (Result<ProxyResponse, any Error>) -> Void) -> Bool {
        guard request.endpoint.scheme == "http", let plain else { return false }
        return plain.start(request, then: done)
    }
}
