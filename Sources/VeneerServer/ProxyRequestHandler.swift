import DequeModule
import HTTPTypes
import Logging
import NIOCore
import VeneerCore
import VeneerHTTP1

/// Serves the requests of one client connection, in order: reads each one whole, answers it
/// through the ``ProxyEdge`` and writes the answer with ``HTTP1ResponseWriter``.
///
/// - Pipelined requests queue up behind the one being answered (at most
///   ``maxQueuedRequests`` or ``maxQueuedBytes``; beyond that the socket is not read).
/// - A body over `limits.request_body`, declared or actual, is not read any further: the
///   request is answered (413, or 405 where the method is wrong anyway) and the connection
///   closed. So is a request that cannot be parsed (400).
/// - The chain's plan (``ChainPlan``) says how: an answer the chain has at once (a fresh
///   cache hit) is written at once; one it starts without a task (the upstream origin on
///   the pooled transport) is written from its callback on this loop. Any other starts as
///   an immediate task: until the chain first suspends it runs right here on the event
///   loop, with no job queued and no thread hop.
/// - Answers are written as they come and flushed by the loop's ``TickFlusher`` once the
///   loop has handled the batch of sockets that were ready: one batch's answers go out back
///   to back (the client is woken about once per batch). Before Veneer closes a connection
///   it flushes what is still waiting.
/// - Connections idle for the idle timeout are closed; on graceful shutdown the connection
///   closes once the request in progress is answered. When Veneer closes a connection it
///   shuts down its side first and discards what the client still sends for a moment (as
///   nginx's lingering close does), so that the client reads the answer instead of a reset.
final class ProxyRequestHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    static let maxQueuedRequests = 16
    static let maxQueuedBytes = 4 << 20
    /// How long a closing connection keeps discarding input before it is closed for good.
    static let lingerTime = TimeAmount.seconds(2)

    /// A request read whole (or refused), waiting for its answer.
    private enum Work {
        case request(HTTP1RequestParser.Head, IncomingBody, keepAlive: Bool)
        /// A request that could not be read: answered with this error, then the connection closes.
        case refusal(ProxyError)

        var size: Int {
            if case .request(_, .complete(let body), _) = self { return body.readableBytes }
            return 0
        }
    }

    private let edge: ProxyEdge
    private let dates: HTTPDateCache
    private let client: ClientAddress?
    private let idleTimeout: TimeAmount
    private let logger: Logger

    private var parser: HTTP1RequestParser
    /// The connection ends after the answers already queued: the rest of the input is dropped.
    private var ignoring = false
    private var queue = Deque<Work>()
    private var queuedBytes = 0
    private var answering = false
    private var quiescing = false
    private var inputClosed = false
    private var closing = false
    private var readsPaused = false
    private var lastActivity = NIODeadline.now()
    private var idleCheck: Scheduled<Void>?
    /// Whether ``startNext(context:)`` is running its loop.
    private var draining = false
    private var outputBuffer: ByteBuffer?

    /// Flushes this loop's writes at the end of each batch.
    private let flusher: TickFlusher
    /// Runs this loop's answering tasks.
    private let executor: EventLoopTaskExecutor

    init(edge: ProxyEdge, dates: HTTPDateCache, client: ClientAddress?, headerLimit: Int, idleTimeout: TimeAmount, eventLoop: any EventLoop,
         logger: Logger) {
        flusher = TickFlusher.for(eventLoop)
        executor = EventLoopTaskExecutor.for(eventLoop)
        parser = HTTP1RequestParser(maxHeadSize: headerLimit, bodyLimit: edge.requestBodyLimit)
        self.edge = edge
        self.dates = dates
        self.client = client
        self.idleTimeout = idleTimeout
        self.logger = logger
    }

    // MARK: Lifecycle

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { scheduleIdleCheck(context: context, at: .now() + idleTimeout) }
    }

    func channelActive(context: ChannelHandlerContext) {
        if idleCheck == nil { scheduleIdleCheck(context: context, at: .now() + idleTimeout) }
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        idleCheck?.cancel()
        idleCheck = nil
        closing = true
        queue.removeAll()
        ignoring = true
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        idleCheck?.cancel()
        idleCheck = nil
    }

    // MARK: Reading requests

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        lastActivity = .now()
        guard !ignoring else { return }
        if !parser.isMidRequest {
            // A reload may have changed the limit; a request keeps the one it started with.
            parser.bodyLimit = edge.requestBodyLimit
        }
        parser.append(unwrapInboundIn(data))
        while !ignoring {
            let event: HTTP1RequestParser.Event?
            do {
                event = try parser.next()
            } catch {
                refuse(.badRequest(error.kind == .headTooLarge ? "The request headers are larger than the limit." : error.reason), context: context)
                return
            }
            guard let event else { return }
            switch event {
            case .waitingForBody:
                // Only when this request is next: an interim answer cannot go between another's parts.
                if !answering, queue.isEmpty {
                    context.writeAndFlush(wrapOutboundOut(ByteBuffer(staticString: HTTP1ResponseWriter.continueResponse)), promise: nil)
                }
            case .request(let head, let body):
                enqueue(.request(head, .complete(body), keepAlive: head.keepAlive), context: context)
            case .tooLarge(let head):
                ignoring = true
                enqueue(.request(head, .tooLarge, keepAlive: false), context: context)
            }
        }
    }

    /// Errors from the socket (a reset) end the connection.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case is ChannelShouldQuiesceEvent:
            quiescing = true
            closeIfIdle(context: context)
        case ChannelEvent.inputClosed:
            inputClosed = true
            if closing {
                // The client has read the answer and closed its side: lingering is over.
                context.close(promise: nil)
            } else {
                closeIfIdle(context: context)
            }
        default:
            context.fireUserInboundEventTriggered(event)
        }
    }

    private func refuse(_ error: ProxyError, context: ChannelHandlerContext) {
        ignoring = true
        enqueue(.refusal(error), context: context)
    }

    // MARK: Answering

    private func enqueue(_ work: Work, context: ChannelHandlerContext) {
        queue.append(work)
        queuedBytes += work.size
        if !readsPaused, queue.count >= Self.maxQueuedRequests || queuedBytes >= Self.maxQueuedBytes {
            // Too much waiting: stop reading the socket until the queue drains (no per-read
            // check while it flows).
            readsPaused = true
            try? context.channel.syncOptions?.setOption(.autoRead, value: false)
        }
        startNext(context: context)
    }

    /// Answers the queued requests in order until one must wait for the chain (or the
    /// connection ends). A loop, not a recursion: a client may pipeline thousands of
    /// requests answered at once (cache hits), each of which would otherwise add frames.
    private func startNext(context: ChannelHandlerContext) {
        // Called again from an answer written within the loop below: the loop goes on.
        guard !draining else { return }
        draining = true
        defer { draining = false }
        while !answering, !closing, let work = queue.popFirst() {
            queuedBytes -= work.size
            if readsPaused, queue.count < Self.maxQueuedRequests, queuedBytes < Self.maxQueuedBytes {
                readsPaused = false
                try? context.channel.syncOptions?.setOption(.autoRead, value: true)
            }
            answering = true
            switch work {
            case .refusal(let error):
                write(ProxyEdge.stamped(error.response, RequestID.generate()), method: .get, keepAlive: false, context: context)
            case .request(let head, let body, let keepAlive):
                switch edge.begin(method: head.method, target: head.target, fields: head.fields, body: body, client: client) {
                case .answered(let response, let refused):
                    // Refused by the edge or answered at once by the chain: no task needed.
                    write(response, method: head.method, keepAlive: keepAlive && !refused && !body.isTooLarge, context: context)
                case .waiting(let pending):
                    answerLater(pending, head: head, tooLarge: body.isTooLarge, keepAlive: keepAlive, context: context)
                }
            }
        }
    }

    /// Where an answer that comes later is written: this handler, on its loop. A value, not a
    /// closure: the callback or the task that carries it needs no allocation of its own for it.
    struct Delivery: AnswerDelivery {
        let loopBound: NIOLoopBound<(handler: ProxyRequestHandler, context: ChannelHandlerContext)>
        let eventLoop: any EventLoop
        let method: HTTPRequest.Method
        let keepAlive: Bool

        func deliver(_ response: ProxyResponse, closeConnection: Bool) {
            let keep = keepAlive && !closeConnection
            if eventLoop.inEventLoop {
                loopBound.value.handler.finish(response, method: method, keepAlive: keep, context: loopBound.value.context)
            } else {
                eventLoop.execute { [loopBound, method] in
                    loopBound.value.handler.finish(response, method: method, keepAlive: keep, context: loopBound.value.context)
                }
            }
        }
    }

    /// Runs the chain without a task where it can, else in a task; its answer is written when
    /// it comes, then the queue goes on.
    private func answerLater(_ pending: consuming ProxyEdge.Pending, head: HTTP1RequestParser.Head, tooLarge: Bool, keepAlive: Bool,
                             context: ChannelHandlerContext) {
        let delivery = Delivery(loopBound: NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop),
                                eventLoop: context.eventLoop, method: head.method, keepAlive: keepAlive && !tooLarge)
        // A chain planned to answer without a task (the upstream origin, maybe behind
        // latency_log) calls back on this loop: no task to create, suspend and resume.
        // Either way the answer may come (inside startNext's loop) before this returns.
        guard let pending = edge.completeWithoutTask(pending, to: delivery) else { return }
        let edge = edge, handed = pending.handOver()
        // The task runs once and ends the request's lease as it completes it.
        Task.immediate(executorPreference: executor) {
            let (response, refused) = await edge.complete(handed)
            delivery.deliver(response, closeConnection: refused)
        }
    }

    /// Writes one answer that came later; then the next request.
    private func finish(_ response: ProxyResponse, method: HTTPRequest.Method, keepAlive: Bool, context: ChannelHandlerContext) {
        write(response, method: method, keepAlive: keepAlive, context: context)
        startNext(context: context)
    }

    /// Writes one answer, or the last one and the end of the connection.
    private func write(_ response: ProxyResponse, method: HTTPRequest.Method, keepAlive: Bool, context: ChannelHandlerContext) {
        answering = false
        lastActivity = .now()
        guard !closing else { return }
        let close = !keepAlive || quiescing || (inputClosed && queue.isEmpty)
        // The last answer's buffer, if the socket has let go of it (the usual case: small
        // answers are written at once): no allocation per answer.
        var buffer = outputBuffer ?? context.channel.allocator.buffer(capacity: 512 + response.body.readableBytes)
        outputBuffer = nil
        buffer.clear()
        HTTP1ResponseWriter.write(response, method: method, close: close, date: dates.now(), into: &buffer)
        if close {
            closing = true
            ignoring = true
            queue.removeAll()
            queuedBytes = 0
            let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
            context.writeAndFlush(wrapOutboundOut(buffer)).whenComplete { _ in
                Self.lingeringClose(loopBound.value)
            }
        } else {
            // Flushed with the other answers of this batch (see TickFlusher).
            context.write(wrapOutboundOut(buffer), promise: nil)
            flusher.flushSoon(context.channel)
            // Unique again once flushed and written: the next answer reuses its storage (if
            // NIO still holds it, clearing it copies, which costs what a new one would).
            outputBuffer = buffer
        }
    }

    /// Shuts the output down (the client sees the end of the answer), keeps discarding input
    /// until the client closes too or ``lingerTime`` passes, then closes.
    private static func lingeringClose(_ context: ChannelHandlerContext) {
        guard context.channel.isActive else { return }
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.close(mode: .output).whenComplete { result in
            let context = loopBound.value
            guard case .success = result else {
                context.close(promise: nil)
                return
            }
            context.eventLoop.scheduleTask(in: lingerTime) { loopBound.value.close(promise: nil) }
            // Keep reading (and dropping), even if reads were paused, so that the client's
            // close is noticed.
            try? context.channel.syncOptions?.setOption(.autoRead, value: true)
            context.read()
        }
    }

    private func closeIfIdle(context: ChannelHandlerContext) {
        // A request being read will close the connection with its answer.
        guard !answering, queue.isEmpty, ignoring || !parser.isMidRequest else { return }
        closing = true
        // The last answers may still wait for the end of the batch (TickFlusher): out first.
        context.flush()
        context.close(promise: nil)
    }

    // MARK: Idle timeout

    private func scheduleIdleCheck(context: ChannelHandlerContext, at deadline: NIODeadline) {
        let loopBound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        idleCheck = context.eventLoop.scheduleTask(deadline: deadline) {
            loopBound.value.handler.checkIdle(context: loopBound.value.context)
        }
    }

    private func checkIdle(context: ChannelHandlerContext) {
        idleCheck = nil
        guard context.channel.isActive else { return }
        let due = lastActivity + idleTimeout
        if !answering, due <= .now() {
            logger.trace("closing an idle connection")
            context.flush()
            context.close(promise: nil)
        } else {
            scheduleIdleCheck(context: context, at: answering ? .now() + idleTimeout : due)
        }
    }
}
