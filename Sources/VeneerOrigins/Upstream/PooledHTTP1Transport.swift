import DequeModule
import HTTPTypes
import NIOCore
import NIOPosix
import VeneerCore
import VeneerHTTP1

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
/// (RFC 9110 §9.2.2), as nginx does.
public final class PooledHTTP1Transport: HTTPTransport {
    /// The idle connections a loop keeps per peer when ``TransportOptions/connectionsPerLoop`` is unset.
    public static let defaultConnectionsPerLoop = 128
    /// How long an idle keep-alive connection stays open.
    static let idleTimeout = TimeAmount.seconds(60)

    let options: TransportOptions
    private let group: any EventLoopGroup
    private let pools: [ObjectIdentifier: LoopPool]
    private let fallback: LoopPool

    /// Creates a transport with one pool per event loop of `eventLoopGroup`.
    public init(options: TransportOptions, eventLoopGroup: any EventLoopGroup) {
        self.options = options
        group = eventLoopGroup
        let limit = max(1, options.connectionsPerLoop ?? Self.defaultConnectionsPerLoop)
        var pools: [ObjectIdentifier: LoopPool] = [:]
        for loop in eventLoopGroup.makeIterator() {
            pools[ObjectIdentifier(loop)] = LoopPool(eventLoop: loop, limit: limit, connectTimeout: TimeAmount(options.connectTimeout))
        }
        let first = eventLoopGroup.next()
        self.pools = pools
        fallback = pools[ObjectIdentifier(first)] ?? LoopPool(eventLoop: first, limit: limit, connectTimeout: TimeAmount(options.connectTimeout))
    }

    /// Sends one request and buffers the response.
    public func send(_ request: OutboundRequest) async throws -> ProxyResponse {
        let pool = pools.count == 1 ? fallback : pools[ObjectIdentifier(group.any())] ?? fallback
        let exchange = Exchange(request: request)
        return try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { continuation in
                exchange.continuation = continuation
                if pool.eventLoop.inEventLoop {
                    pool.start(exchange)
                } else {
                    pool.eventLoop.execute { pool.start(exchange) }
                }
            }
        } onCancel: {
            pool.eventLoop.execute { pool.cancel(exchange) }
        }
    }

    /// Plain `http://` peers: on one of the transport's event loops, always.
    public func startsWithoutTask(to endpoint: Endpoint) -> Bool {
        endpoint.scheme == "http"
    }

    /// Sends one request without a task when called on one of the transport's event loops.
    public func start(_ request: OutboundRequest, then done: @escaping @Sendable (Result<ProxyResponse, ProxyError>) -> Void) -> Bool {
        let pool = pools.count == 1 ? fallback : pools[ObjectIdentifier(group.any())] ?? fallback
        guard pool.eventLoop.inEventLoop else { return false }
        let exchange = Exchange(request: request)
        exchange.callback = done
        pool.start(exchange)
        return true
    }

    /// Closes every connection; requests still in flight fail.
    public func shutdown() async {
        var closing: [EventLoopFuture<Void>] = []
        for pool in pools.values {
            closing.append(pool.eventLoop.flatSubmit { pool.shutdown() })
        }
        for future in closing { try? await future.get() }
    }
}

/// One request on its way: what to send, when it must be done, and how it ends.
/// Touched only on its pool's event loop once started.
final class Exchange: @unchecked Sendable {
    let request: OutboundRequest
    /// Who waits for the outcome: a task, or (``PooledHTTP1Transport/start(_:then:)``) a callback.
    var continuation: UnsafeContinuation<ProxyResponse, any Error>?
    var callback: (@Sendable (Result<ProxyResponse, ProxyError>) -> Void)?
    var deadline = NIODeadline.distantFuture
    var peer: PeerPool?
    var connection: UpstreamConnection?
    /// Its index in the pool's exchanges under way (for the deadline sweep), or -1.
    var slot = -1
    var started = false
    var cancelled = false
    var retried = false
    var finished = false

    init(request: OutboundRequest) {
        self.request = request
    }

    var isIdempotent: Bool {
        switch request.method {
        case .get, .head, .put, .delete, .options, .trace: true
        default: false
        }
    }

    /// Resumes the caller once; later outcomes (a late timeout, a late close) are ignored.
    fileprivate func resume(_ result: Result<ProxyResponse, ProxyError>) {
        guard !finished else { return }
        finished = true
        connection = nil
        let continuation = self.continuation
        self.continuation = nil
        if let callback {
            self.callback = nil
            callback(result)
            return
        }
        switch result {
        case .success(let response): continuation?.resume(returning: response)
        case .failure(let error): continuation?.resume(throwing: error)
        }
    }
}

/// The connections of one event loop to one peer (host and port). Touched only on that loop.
final class PeerPool: @unchecked Sendable {
    let host: String
    let port: Int
    var idle: [UpstreamConnection] = []
    var open = 0
    var waiting = Deque<Exchange>()

    init(host: String, port: Int) {
        self.host = host
        self.port = port
    }
}

/// The connections of one event loop. Touched only on that loop.
///
/// Deadlines are checked by one sweep every ``sweepInterval`` over the exchanges under way
/// rather than a timer per request: a timeout fires up to that much late, and a request
/// costs no timer to schedule and cancel.
final class LoopPool: @unchecked Sendable {
    static let sweepInterval = TimeAmount.milliseconds(25)

    let eventLoop: any EventLoop
    let limit: Int
    let connectTimeout: TimeAmount
    /// Usually one: looked up by comparing host and port, no hashing.
    private var peers: [PeerPool] = []
    private var active: [Exchange] = []
    private var deadlineSweeper: RepeatedTask?
    private var idleSweeper: RepeatedTask?
    private var isShutDown = false

    init(eventLoop: any EventLoop, limit: Int, connectTimeout: TimeAmount) {
        self.eventLoop = eventLoop
        self.limit = limit
        self.connectTimeout = connectTimeout
    }

    private func peer(for endpoint: Endpoint) -> PeerPool {
        for peer in peers where peer.port == endpoint.port && peer.host == endpoint.host { return peer }
        let peer = PeerPool(host: endpoint.host, port: endpoint.port)
        peers.append(peer)
        return peer
    }

    /// Starts `exchange`: on an idle connection, a new one, or in the queue.
    func start(_ exchange: Exchange) {
        exchange.started = true
        guard !isShutDown else {
            exchange.resume(.failure(ProxyError.upstreamUnavailable("Veneer is shutting down.").neverSent))
            return
        }
        guard !exchange.cancelled else {
            exchange.resume(.failure(ProxyError.upstreamUnavailable("The request to the upstream \(exchange.request.endpoint.authority) was cancelled.").neverSent))
            return
        }
        exchange.deadline = .now() + TimeAmount(exchange.request.timeout)
        exchange.peer = peer(for: exchange.request.endpoint)
        exchange.slot = active.count
        active.append(exchange)
        if deadlineSweeper == nil { startDeadlineSweeper() }
        dispatch(exchange)
    }

    /// Ends `exchange` (it leaves the exchanges under way) and resumes its caller.
    private func finish(_ exchange: Exchange, _ result: Result<ProxyResponse, ProxyError>) {
        guard !exchange.finished else { return }
        if exchange.slot >= 0 {
            let last = active.removeLast()
            if last !== exchange {
                active[exchange.slot] = last
                last.slot = exchange.slot
            }
            exchange.slot = -1
        }
        exchange.resume(result)
    }

    private func dispatch(_ exchange: Exchange) {
        let peer = exchange.peer!
        while let connection = peer.idle.popLast() {
            if connection.channel.isActive {
                run(exchange, on: connection, reused: true)
                return
            }
        }
        if peer.open < limit {
            connect(for: exchange, to: peer)
        } else {
            peer.waiting.append(exchange)
        }
    }

    private func connect(for exchange: Exchange, to peer: PeerPool) {
        peer.open += 1
        let remaining = exchange.deadline - .now()
        let timeout = min(connectTimeout, max(remaining, .milliseconds(1)))
        let connecting = ClientBootstrap(group: eventLoop)
            .connectTimeout(timeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(UpstreamConnection.Handler(eventLoop: channel.eventLoop))
                }
            }
            .connect(host: peer.host, port: peer.port)
        connecting.whenComplete { [self] result in
            switch result {
            case .success(let channel):
                let connection = UpstreamConnection(channel: channel, peer: peer, pool: self)
                channel.closeFuture.whenComplete { [self] _ in connectionClosed(connection) }
                startIdleSweeper()
                if exchange.finished || isShutDown {
                    release(connection)
                } else {
                    run(exchange, on: connection, reused: false)
                }
            case .failure(let error):
                peer.open -= 1
                let target = exchange.request.endpoint.authority
                if case ChannelError.connectTimeout? = error as? ChannelError {
                    finish(exchange, .failure(ProxyError.upstreamTimeout("Connecting to the upstream \(target) timed out.").neverSent))
                } else {
                    finish(exchange, .failure(ProxyError.upstreamUnavailable("The upstream \(target) is unreachable.").neverSent))
                }
                serveWaiting(peer)
            }
        }
    }

    private func run(_ exchange: Exchange, on connection: UpstreamConnection, reused: Bool) {
        exchange.connection = connection
        connection.handler.begin(exchange, reused: reused)
    }

    /// How an exchange on `connection` ended.
    fileprivate func completed(_ exchange: Exchange, on connection: UpstreamConnection, reused: Bool, _ outcome: UpstreamConnection.Outcome) {
        switch outcome {
        case .response(let response, let keepAlive):
            // The connection first: a callback may send the next request at once.
            if keepAlive { release(connection) } else { connection.channel.close(promise: nil) }
            finish(exchange, .success(response))
        case .failed(let error):
            finish(exchange, .failure(error))
            connection.channel.close(promise: nil)
        case .closedBeforeResponse:
            connection.channel.close(promise: nil)
            if reused, exchange.isIdempotent, !exchange.retried, !exchange.finished {
                exchange.retried = true
                exchange.connection = nil
                dispatch(exchange)
            } else {
                let target = exchange.request.endpoint.authority
                finish(exchange, .failure(.upstreamUnavailable("The upstream \(target) closed the connection without answering.")))
            }
        }
    }

    /// A connection is free again: the next waiting request gets it, or it idles.
    private func release(_ connection: UpstreamConnection) {
        let peer = connection.peer
        guard !isShutDown, connection.channel.isActive else {
            connection.channel.close(promise: nil)
            return
        }
        while let next = peer.waiting.popFirst() {
            if !next.finished {
                run(next, on: connection, reused: true)
                return
            }
        }
        connection.idleSince = .now()
        peer.idle.append(connection)
    }

    /// A connection closed (by either side): it no longer counts, and a waiting request may connect.
    private func connectionClosed(_ connection: UpstreamConnection) {
        let peer = connection.peer
        peer.open -= 1
        if let index = peer.idle.firstIndex(where: { $0 === connection }) {
            peer.idle.remove(at: index)
        }
        serveWaiting(peer)
    }

    private func serveWaiting(_ peer: PeerPool) {
        guard !isShutDown else { return }
        while peer.open < limit, let next = peer.waiting.popFirst() {
            if !next.finished { connect(for: next, to: peer) }
        }
    }

    /// Fails the exchanges whose deadline has passed, and closes their connections.
    private func sweepDeadlines() {
        guard !active.isEmpty else {
            // Nothing under way: stop ticking until the next request.
            deadlineSweeper?.cancel()
            deadlineSweeper = nil
            return
        }
        let now = NIODeadline.now()
        var index = 0
        while index < active.count {
            let exchange = active[index]
            if exchange.deadline <= now {
                let target = exchange.request.endpoint.authority
                let connection = exchange.connection
                var error = ProxyError.upstreamTimeout("The upstream \(target) did not answer within \(exchange.request.timeout).")
                // Still waiting for a connection (or for it to open): nothing was written.
                if connection == nil { error = error.neverSent }
                // finish moves the last exchange into this slot: look at the same index again.
                finish(exchange, .failure(error))
                connection?.handler.abandon()
                connection?.channel.close(promise: nil)
            } else {
                index += 1
            }
        }
    }

    /// The caller's task was cancelled: give up on the exchange and its connection.
    func cancel(_ exchange: Exchange) {
        exchange.cancelled = true
        guard exchange.started, !exchange.finished else { return }
        let target = exchange.request.endpoint.authority
        let connection = exchange.connection
        var error = ProxyError.upstreamUnavailable("The request to the upstream \(target) was cancelled.")
        if connection == nil { error = error.neverSent }
        finish(exchange, .failure(error))
        connection?.handler.abandon()
        connection?.channel.close(promise: nil)
    }

    private func startDeadlineSweeper() {
        guard !isShutDown else { return }
        deadlineSweeper = eventLoop.scheduleRepeatedTask(initialDelay: Self.sweepInterval, delay: Self.sweepInterval) { [self] _ in
            sweepDeadlines()
        }
    }

    /// Closes idle connections that outstayed ``PooledHTTP1Transport/idleTimeout``.
    private func startIdleSweeper() {
        guard idleSweeper == nil, !isShutDown else { return }
        idleSweeper = eventLoop.scheduleRepeatedTask(initialDelay: .seconds(5), delay: .seconds(5)) { [self] _ in
            let cutoff = NIODeadline.now() - PooledHTTP1Transport.idleTimeout
            for peer in peers {
                for connection in peer.idle where connection.idleSince < cutoff {
                    connection.channel.close(promise: nil)
                }
            }
        }
    }

    func shutdown() -> EventLoopFuture<Void> {
        isShutDown = true
        deadlineSweeper?.cancel()
        deadlineSweeper = nil
        idleSweeper?.cancel()
        idleSweeper = nil
        var connections: [UpstreamConnection] = []
        for peer in peers {
            for exchange in peer.waiting { finish(exchange, .failure(ProxyError.upstreamUnavailable("Veneer is shutting down.").neverSent)) }
            peer.waiting.removeAll()
            connections += peer.idle
            peer.idle.removeAll()
        }
        let closing = connections.map { $0.channel.close() }
        return EventLoopFuture.andAllComplete(closing, on: eventLoop)
    }
}

/// One keep-alive connection to a peer and the handler that reads its responses.
final class UpstreamConnection: @unchecked Sendable {
    let channel: any Channel
    let peer: PeerPool
    let handler: Handler
    var idleSince = NIODeadline.now()

    init(channel: any Channel, peer: PeerPool, pool: LoopPool) {
        self.channel = channel
        self.peer = peer
        handler = try! channel.pipeline.syncOperations.handler(type: Handler.self)
        // A cycle (connection, handler, closure) that the channel's close breaks.
        handler.onComplete = { exchange, reused, outcome in
            pool.completed(exchange, on: self, reused: reused, outcome)
        }
    }

    enum Outcome {
        case response(ProxyResponse, keepAlive: Bool)
        case failed(ProxyError)
        /// The peer closed (or reset) the connection before a byte of the response.
        case closedBeforeResponse
    }

    /// Writes one request (serialized here, head and body in one buffer) and reads its
    /// response with ``HTTP1ResponseParser``. One exchange at a time (no pipelining).
    final class Handler: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer

        private var context: ChannelHandlerContext?
        /// Where outcomes go (the pool); cleared when the channel closes.
        fileprivate var onComplete: ((Exchange, Bool, Outcome) -> Void)?
        private var exchange: Exchange?
        private var reused = false
        private var parser = HTTP1ResponseParser(maxBodySize: 0)
        private var sawBytes = false
        private var outputBuffer: ByteBuffer?
        private let flusher: TickFlusher

        init(eventLoop: any EventLoop) {
            flusher = TickFlusher.for(eventLoop)
        }

        func handlerAdded(context: ChannelHandlerContext) {
            self.context = context
        }

        func handlerRemoved(context: ChannelHandlerContext) {
            self.context = nil
        }

        func begin(_ exchange: Exchange, reused: Bool) {
            self.exchange = exchange
            self.reused = reused
            sawBytes = false
            guard let context, context.channel.isActive else {
                complete(.closedBeforeResponse)
                return
            }
            let request = exchange.request
            parser.reset()
            parser.maxBodySize = request.maxResponseBodySize
            // The last request's buffer is free again once written: no allocation per request.
            var buffer = outputBuffer ?? context.channel.allocator.buffer(capacity: 512 + (request.body?.readableBytes ?? 0))
            outputBuffer = nil  // so that clearing finds the storage unshared
            buffer.clear()
            Self.serialize(request, into: &buffer)
            // A write that fails closes the channel: channelInactive completes the exchange.
            // Flushed with the other writes of this batch (see TickFlusher).
            context.write(wrapOutboundOut(buffer), promise: nil)
            flusher.flushSoon(context.channel)
            outputBuffer = buffer
        }

        /// `METHOD target HTTP/1.1`, `Host`, the end-to-end fields, `Content-Length` when
        /// there is a body, then the body.
        static func serialize(_ request: OutboundRequest, into buffer: inout ByteBuffer) {
            buffer.writeString(request.method.rawValue)
            buffer.writeInteger(UInt8(ascii: " "))
            buffer.writeString(request.target)
            buffer.writeStaticString(" HTTP/1.1\r\nHost: ")
            buffer.writeString(request.endpoint.authority)
            buffer.writeStaticString("\r\n")
            for field in request.headers {
                let name = field.name.canonicalName
                if HopByHop.isRemoved(name) || name == "host" { continue }
                buffer.writeString(field.name.rawName)
                buffer.writeStaticString(": ")
                buffer.writeString(field.value)
                buffer.writeStaticString("\r\n")
            }
            if let body = request.body {
                buffer.writeStaticString("Content-Length: ")
                buffer.writeString(String(body.readableBytes))
                buffer.writeStaticString("\r\n\r\n")
                buffer.writeImmutableBuffer(body)
            } else {
                buffer.writeStaticString("\r\n")
            }
        }

        /// Forgets the exchange (it timed out or was cancelled); the connection is being closed.
        func abandon() {
            exchange = nil
            parser.reset()
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            sawBytes = true
            guard let exchange else {
                // Nothing was asked: a peer that talks out of turn cannot be trusted with the next request.
                context.close(promise: nil)
                return
            }
            parser.append(unwrapInboundIn(data))
            do {
                guard let parsed = try parser.next(requestMethod: exchange.request.method) else { return }
                // Bytes beyond the answer were not asked for: do not reuse the connection.
                complete(.response(parsed.response, keepAlive: parsed.keepAlive && !parser.hasUnreadBytes))
            } catch where error.kind == .bodyTooLarge {
                complete(.failed(.upstreamUnavailable(error.reason)))
            } catch {
                complete(.failed(.upstreamUnavailable("The upstream \(exchange.request.endpoint.authority) sent a malformed response: \(error.reason)")))
            }
        }

        func channelInactive(context: ChannelHandlerContext) {
            if let exchange {
                if !sawBytes {
                    complete(.closedBeforeResponse)
                } else {
                    do {
                        if let parsed = try parser.endOfInput() {
                            complete(.response(parsed.response, keepAlive: false))
                        } else {
                            complete(.closedBeforeResponse)
                        }
                    } catch {
                        complete(.failed(.upstreamUnavailable("The upstream \(exchange.request.endpoint.authority) closed the connection mid-response.")))
                    }
                }
            }
            onComplete = nil
            context.fireChannelInactive()
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            // The peer closed its side: a body that runs until the close is complete.
            if case ChannelEvent.inputClosed = event {
                context.close(promise: nil)
            }
            context.fireUserInboundEventTriggered(event)
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            if let exchange, sawBytes {
                complete(.failed(.upstreamUnavailable("The upstream \(exchange.request.endpoint.authority) failed mid-response.")))
            } else if exchange != nil {
                complete(.closedBeforeResponse)
            }
            context.close(promise: nil)
        }

        private func complete(_ outcome: Outcome) {
            guard let exchange else { return }
            self.exchange = nil
            parser.reset()
            onComplete?(exchange, reused, outcome)
        }
    }
}
