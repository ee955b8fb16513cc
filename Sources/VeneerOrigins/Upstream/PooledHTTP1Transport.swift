import NIOCore
import VeneerCore

/// ``HTTPTransport`` for plain `http://` peers: HTTP/1.1 over SwiftNIO with a keep-alive pool
/// per event loop, in the manner of nginx's upstream `keepalive`.
///
/// A request is sent from the event loop its caller runs on (a connection's task runs on its
/// channel's event loop, see `EventLoopTaskExecutor` in VeneerHTTP1), so the proxied exchange
/// never leaves that thread and the pools need no locks. Each loop keeps at most
/// ``TransportOptions/connectionsPerLoop`` connections (128 when unset) to one peer; requests
/// beyond that wait for a connection, within their own deadline.
///
/// Failures: a refused or failed connection, a reset, a malformed or oversized response are
/// `upstream_unavailable`; a connect or request deadline that passes is `upstream_timeout`.
/// A request that finds its reused keep-alive connection closed by the peer before any
/// response byte is retried once on a new connection when its method is idempotent
/// (RFC 9110 §9.2.2), as nginx does. A failure is marked ``ProxyError/requestNeverSent`` only
/// while no connection can have written a byte of the request (it waited, or its connection
/// never opened).
///
/// The protocol state is in three state machines (`Upstream/Pool/`): one per connection
/// (``UpstreamConnectionStateMachine``), one per loop's pool (``UpstreamPoolStateMachine``)
/// and one per request (``UpstreamExchangeStateMachine``); ``UpstreamLoopPool`` and
/// ``UpstreamConnectionHandler`` only perform what they decide.
public final class PooledHTTP1Transport: HTTPTransport {
    /// The idle connections a loop keeps per peer when ``TransportOptions/connectionsPerLoop`` is unset.
    public static let defaultConnectionsPerLoop = 128
    /// How long an idle keep-alive connection stays open.
    static let idleTimeout = TimeAmount.seconds(60)

    let options: TransportOptions
    private let group: any EventLoopGroup
    private let pools: [ObjectIdentifier: NIOLoopBoundBox<UpstreamLoopPool>]
    private let fallback: NIOLoopBoundBox<UpstreamLoopPool>

    /// Creates a transport with one pool per event loop of `eventLoopGroup`.
    public init(options: TransportOptions, eventLoopGroup: any EventLoopGroup, metrics: UpstreamMetrics = .none) {
        self.options = options
        group = eventLoopGroup
        let limit = max(1, options.connectionsPerLoop ?? Self.defaultConnectionsPerLoop)
        let connectTimeout = TimeAmount(options.connectTimeout)
        func pool(on loop: any EventLoop) -> NIOLoopBoundBox<UpstreamLoopPool> {
            .makeBoxSendingValue(UpstreamLoopPool(eventLoop: loop, limit: limit, connectTimeout: connectTimeout, idleTimeout: Self.idleTimeout,
                                                  metrics: metrics),
                                 eventLoop: loop)
        }
        var pools: [ObjectIdentifier: NIOLoopBoundBox<UpstreamLoopPool>] = [:]
        for loop in eventLoopGroup.makeIterator() {
            pools[ObjectIdentifier(loop)] = pool(on: loop)
        }
        let first = eventLoopGroup.next()
        self.pools = pools
        fallback = pools[ObjectIdentifier(first)] ?? pool(on: first)
    }

    /// The pool of the loop the caller runs on (any, off the loops).
    private var pool: NIOLoopBoundBox<UpstreamLoopPool> {
        pools.count == 1 ? fallback : pools[ObjectIdentifier(group.any())] ?? fallback
    }

    /// Sends one request and buffers the response.
    public func send(_ request: consuming OutboundRequest) async throws -> ProxyResponse {
        let pool = self.pool
        let exchange = UpstreamExchange(request: request)
        return try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { continuation in
                if pool.eventLoop.inEventLoop {
                    pool.value.start(exchange, .task(continuation))
                } else {
                    pool.eventLoop.execute { pool.value.start(exchange, .task(continuation)) }
                }
            }
        } onCancel: {
            pool.eventLoop.execute { pool.value.cancel(exchange) }
        }
    }

    /// Plain `http://` peers: on one of the transport's event loops, always.
    public func startsWithoutTask(to endpoint: Endpoint) -> Bool {
        endpoint.scheme == "http"
    }

    /// Sends one request without a task when called on one of the transport's event loops.
    public func start(_ request: consuming OutboundRequest, then done: @escaping @Sendable (Result<ProxyResponse, any Error>) -> Void) -> Bool {
        let pool = self.pool
        guard pool.eventLoop.inEventLoop else { return false }
        pool.value.start(UpstreamExchange(request: request), .callback(done))
        return true
    }

    /// Closes every connection; requests still held fail.
    public func shutdown() async {
        var closing: [EventLoopFuture<Void>] = []
        for pool in pools.values {
            closing.append(pool.eventLoop.flatSubmit { pool.value.shutdown() })
        }
        for future in closing { try? await future.get() }
    }
}
