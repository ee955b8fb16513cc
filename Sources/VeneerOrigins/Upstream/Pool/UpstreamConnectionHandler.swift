import NIOCore
import VeneerCore
import VeneerHTTP1

/// The NIO side of one upstream connection: feeds the channel's events to an
/// ``UpstreamConnectionStateMachine`` and does what it says: writes a request, closes the
/// channel, and reports outcomes to its ``UpstreamLoopPool``. Lives on its channel's event
/// loop, as does the pool.
///
/// A streamed body (``BodyStream``) is read with `autoRead` off: one read of the socket per
/// part its consumer asks for, so that a client that does not read stops this connection being
/// read (and the upstream's sending, once the socket's buffers fill).
final class UpstreamConnectionHandler: ChannelInboundHandler, RemovableChannelHandler, BodyStream.Source {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    typealias ID = UpstreamLoopPool.StateMachine.ConnectionID

    /// Its name in the pool.
    let id: ID
    private var state = UpstreamConnectionStateMachine()
    /// Where outcomes go; set once the connection is established.
    private var pool: UpstreamLoopPool?
    private var context: ChannelHandlerContext?
    /// The last request's buffer, free again once written: no allocation per request.
    private var outputBuffer: ByteBuffer?
    private let flusher: TickFlusher
    /// The exchange running on this connection (its request, and its state as a request:
    /// ``UpstreamExchangeStateMachine``), until it is over.
    private var exchange: UpstreamExchange?
    /// The streamed body being read, if any.
    private var stream: BodyStream?
    /// The longest pause of the streamed body while a part is wanted (made a `TimeAmount` only
    /// when a timer is armed: most answers arm none).
    private var bodyTimeout = Duration.seconds(30)
    private var pauseTimer: Scheduled<Void>?
    /// The request body being sent as it streams, if any, and whether it goes chunked.
    private var requestStream: BodyStream?
    private var requestChunked = false
    /// While a written part of the streamed request body has not left the channel: the longest
    /// the upstream may take nothing (`body_timeout`, as nginx's `proxy_send_timeout`).
    private var sendTimer: Scheduled<Void>?
    /// The wait for an answer's head once a streamed request body has been sent (`timeout`).
    private var headTimeout = Duration.seconds(10)

    init(id: ID, eventLoop: any EventLoop) {
        self.id = id
        flusher = TickFlusher.for(eventLoop)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    /// The connection is established and belongs to `pool`.
    func attach(to pool: UpstreamLoopPool) {
        self.pool = pool
        state.connected()
    }

    /// When the channel has closed (nil once the handler is gone).
    var closeFuture: EventLoopFuture<Void>? { context?.channel.closeFuture }

    /// Sends `exchange`'s request (the pool runs one at a time on a connection).
    func start(_ exchange: UpstreamExchange) {
        // The request is read in place (`exchange.request.…`): a copy would retain and
        // release each of its parts.
        let isActive = context?.channel.isActive ?? false
        guard case .write = state.startRequest(exchange.request.method, maxResponseBodySize: exchange.request.maxResponseBodySize,
                                               streamThreshold: exchange.request.streamThreshold, budget: exchange.request.buffers,
                                               channelIsActive: isActive),
              let context
        else {
            pool?.closedBeforeResponse(on: id, requestSent: false)
            return
        }
        self.exchange = exchange
        bodyTimeout = exchange.request.bodyTimeout
        headTimeout = exchange.request.timeout
        var buffer = outputBuffer ?? context.channel.allocator.buffer(capacity: 512 + (exchange.request.body?.readableBytes ?? 0))
        outputBuffer = nil  // so that clearing finds the storage unshared
        buffer.clear()
        exchange.writeRequest(into: &buffer)
        // A write that fails closes the channel: channelInactive reports the exchange.
        // Flushed with the other writes of this batch (see TickFlusher).
        context.write(wrapOutboundOut(buffer), promise: nil)
        flusher.flushSoon(context)
        outputBuffer = buffer
        if let stream = exchange.request.bodyStream { sendRequestBody(stream, context) }
    }

    // MARK: A streamed request body

    /// Sends `stream` after the head, one part at a time: the next part is asked for only once
    /// the last one left the channel (so a slow upstream slows the client's sending down).
    private func sendRequestBody(_ stream: BodyStream, _ context: ChannelHandlerContext) {
        requestStream = stream
        // `timeout` waits until the body has been sent: an upload may take longer than it.
        pool?.requestBodyStreams(on: id)
        requestChunked = stream.expectedLength == nil
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        let loop = context.eventLoop
        stream.start { event in
            loop.execute { loopBound.value.requestBodyEvent(event, from: stream) }
        }
        stream.read()
    }

    private func requestBodyEvent(_ event: BodyStream.Event, from stream: BodyStream) {
        guard stream === requestStream, let context else { return }
        switch event {
        case .part(let part):
            let promise = context.eventLoop.makePromise(of: Void.self)
            if requestChunked {
                guard part.readableBytes > 0 else {
                    stream.read()
                    return
                }
                var size = context.channel.allocator.buffer(capacity: 18)
                size.writeString(String(part.readableBytes, radix: 16))
                size.writeStaticString("\r\n")
                context.write(wrapOutboundOut(size), promise: nil)
                context.write(wrapOutboundOut(part), promise: nil)
                context.writeAndFlush(wrapOutboundOut(ByteBuffer(staticString: "\r\n")), promise: promise)
            } else {
                context.writeAndFlush(wrapOutboundOut(part), promise: promise)
            }
            if exchange?.state.requestBodyPartWritten() == true { armSendTimer(context) }
            let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
            promise.futureResult.whenSuccess {
                let handler = loopBound.value
                guard stream === handler.requestStream else { return }
                // The upstream took it: the pause is over.
                handler.cancelSendTimer()
                guard handler.exchange?.state.requestBodyPartSent() == true else { return }
                stream.read()
            }
        case .end:
            requestStream = nil
            cancelSendTimer()
            if requestChunked {
                context.writeAndFlush(wrapOutboundOut(ByteBuffer(staticString: "0\r\n\r\n")), promise: nil)
            }
            if exchange?.state.requestBodyEnded() == true {
                pool?.requestBodySent(on: id, deadline: .now() + TimeAmount(headTimeout))
            }
        case .failed:
            requestStream = nil
            cancelSendTimer()
            // The upstream has part of a request: the connection closes, never pooled.
            guard let exchange, exchange.state.requestBodyCut() != .none else { return }
            perform(state.abandon(.requestBodyCut))
        }
    }

    /// `body_timeout` from now, unless armed already: the longest a written part of the
    /// request body may wait for the upstream to take it.
    private func armSendTimer(_ context: ChannelHandlerContext) {
        guard sendTimer == nil else { return }
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        sendTimer = context.eventLoop.scheduleTask(in: TimeAmount(bodyTimeout)) {
            let handler = loopBound.value
            handler.sendTimer = nil
            handler.requestBodySendTimedOut()
        }
    }

    private func cancelSendTimer() {
        sendTimer?.cancel()
        sendTimer = nil
    }

    /// The upstream stopped reading the request body: the connection closes, never pooled, and
    /// the exchange fails with a timeout (or its streamed answer is cut).
    private func requestBodySendTimedOut() {
        guard let exchange, exchange.state.requestBodySendTimedOut() != .none else { return }
        perform(state.abandon(.requestBodyTimedOut))
    }

    /// The connection closes or the request was answered early: the rest of the request's
    /// body is not sent, and its producer hears so.
    private func dropRequestBody() {
        cancelSendTimer()
        guard let stream = requestStream else { return }
        requestStream = nil
        stream.cancel()
    }

    /// The pool gives up on the connection: it closes, and reports nothing more.
    func close() {
        perform(state.close())
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var action = state.read(unwrapInboundIn(data))
        // A streamed body's parts: each handed on, until the bytes read are used up.
        while true {
            let parseOn: Bool
            switch action {
            case .streamHead, .streamPart: parseOn = true
            default: parseOn = false
            }
            // Handed on, not copied (the next action is a new value).
            perform(consume action)
            guard parseOn else {
                readOnIfWanted()
                return
            }
            action = state.parseNext()
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        perform(state.channelInactive())
        dropRequestBody()
        cancelPauseTimer()
        context.fireChannelInactive()
    }

    // MARK: The streamed body's source

    /// A consumer took the body: the deadline for that (armed with the head) is over.
    func bodyStarted() {
        exchange?.state.answerBodyStarted()
        cancelPauseTimer()
        readOnIfWanted()
    }

    /// Its consumer wants a part: read the socket once more.
    func bodyDemanded() {
        guard exchange?.state.answerPartWanted() == true else { return }
        readOnIfWanted()
    }

    /// Its consumer left: the connection closes, with the rest of the body on it.
    func bodyCancelled() {
        stream = nil
        cancelPauseTimer()
        _ = exchange?.state.clientLeft()
        exchange = nil
        perform(state.bodyCancelled())
        pool?.bodyEnded(on: id, keepAlive: false)
    }

    /// While the stream wants a part: one more read, and a deadline for it (`body_timeout`).
    private func readOnIfWanted() {
        guard let stream, stream.wantsPart, let context else { return }
        context.read()
        armPauseTimer(context)
    }

    /// `body_timeout` from now: the longest the upstream may pause while a part is wanted, and
    /// the longest a head may wait for its body's consumer (a decorator that dropped an answer
    /// without reading or discarding it must not keep the connection taken).
    private func armPauseTimer(_ context: ChannelHandlerContext) {
        guard pauseTimer == nil else { return }
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        pauseTimer = context.eventLoop.scheduleTask(in: TimeAmount(bodyTimeout)) {
            let handler = loopBound.value
            handler.pauseTimer = nil
            handler.perform(handler.state.bodyPauseTimedOut())
        }
    }

    private func cancelPauseTimer() {
        pauseTimer?.cancel()
        pauseTimer = nil
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // The peer closed its side: a body that runs until the close is complete.
        if case ChannelEvent.inputClosed = event {
            perform(state.inputClosed())
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        perform(state.errorCaught())
    }

    /// What a streamed body's consumer hears when it is cut (its head is out: the client's
    /// connection closes).
    private static func error(_ failure: UpstreamFailure, peer: SocketAddress?) -> ProxyError {
        let target = peer?.description ?? "the upstream"
        switch failure {
        case .timedOut:
            return .upstreamTimeout("The upstream paused the answer's body for too long.", detail: "\(target) sent nothing for limits.body_timeout")
        case .malformed(let reason):
            return .upstreamUnavailable("The upstream sent a malformed response.", detail: "\(target): \(reason)")
        default:
            return .upstreamUnavailable("The upstream failed mid-response.", detail: "\(target) failed or closed mid-response")
        }
    }

    /// Closes first, then reports: the pool hears of an outcome with the connection's fate settled.
    /// The action is taken apart, not copied: an answer is handed on to the pool as it is.
    private func perform(_ action: consuming UpstreamConnectionStateMachine.Action) {
        switch consume action {
        case .none, .write:
            break
        case .notSent:
            exchange = nil
            pool?.closedBeforeResponse(on: id, requestSent: false)
        case .close:
            dropRequestBody()
            context?.close(promise: nil)
        case .deliver(let response, let keepAlive):
            // An early answer (its request body still on its way) leaves the connection unusable.
            let reusable = exchange?.state.answerComplete(keepAlive: keepAlive) ?? keepAlive
            if keepAlive, !reusable { _ = state.close() }
            if !reusable {
                dropRequestBody()
                context?.close(promise: nil)
            }
            exchange = nil
            pool?.responseReceived(on: id, response, keepAlive: reusable)
        case .fail(let failure):
            exchange = nil
            dropRequestBody()
            context?.close(promise: nil)
            pool?.requestFailed(on: id, failure)
        case .closedBeforeResponse:
            // Not retried once a streamed request body was taken from its stream.
            guard exchange?.state.mayRetryBeforeAnswer ?? true else { return perform(.fail(.closedWithoutAnswer)) }
            exchange = nil
            dropRequestBody()
            context?.close(promise: nil)
            pool?.closedBeforeResponse(on: id, requestSent: true)
        case .streamHead(let head, let expectedLength):
            guard let context else { return }
            // From now on the socket is read only when the body's consumer asks for a part.
            context.channel.setOption(ChannelOptions.autoRead, value: false).whenFailure { _ in }
            let stream = BodyStream(eventLoop: context.eventLoop, expectedLength: expectedLength, source: self)
            self.stream = stream
            armPauseTimer(context)
            var response = head
            response.stream = stream
            pool?.responseHeadReceived(on: id, response)
        case .streamPart(let part):
            // Bytes came: the pause is over (not the wait for a consumer, which has its own clock).
            if exchange?.state.answerPartArrived() == true { cancelPauseTimer() }
            _ = stream?.yield(part)
        case .streamEnd(let wireKeepAlive):
            cancelPauseTimer()
            let ended = stream
            stream = nil
            // An early answer (its request body still on its way) leaves the connection unusable.
            let keepAlive = exchange?.state.answerComplete(keepAlive: wireKeepAlive) ?? wireKeepAlive
            if wireKeepAlive, !keepAlive { _ = state.close() }
            exchange = nil
            if keepAlive {
                context?.channel.setOption(ChannelOptions.autoRead, value: true).whenFailure { _ in }
            } else {
                dropRequestBody()
                context?.close(promise: nil)
            }
            pool?.bodyEnded(on: id, keepAlive: keepAlive)
            ended?.finish(nil)
        case .streamFailed(let failure):
            cancelPauseTimer()
            _ = exchange?.state.upstreamFailedMidBody()
            exchange = nil
            let cut = stream
            stream = nil
            dropRequestBody()
            context?.close(promise: nil)
            pool?.bodyEnded(on: id, keepAlive: false)
            cut?.finish(Self.error(failure, peer: context?.channel.remoteAddress))
        }
    }
}
