import HTTPTypes
import Logging
import NIOCore
import VeneerCore
import VeneerHTTP1

/// Serves the requests of one client connection, in order: reads each one whole, answers it
/// through the ``ProxyEdge`` and writes the answer with ``HTTP1ResponseWriter``.
///
/// What the connection does when is decided by ``ServerConnectionStateMachine`` (pipelining,
/// the limits, timeouts, quiescing, lingering close); this handler feeds it the channel's
/// events and performs its actions, and tells its ``AnswerObserver`` what it answered (the
/// metrics, the status page's feed and the access log are the observer's):
/// - The chain's plan (``ChainPlan``) says how a request is answered: an answer the chain has
///   at once (a fresh cache hit) is written at once; one it starts without a task (the
///   upstream origin on the pooled transport) is written from its callback on this loop. Any
///   other starts as an immediate task: until the chain first suspends it runs right here on
///   the event loop, with no job queued and no thread hop.
/// - Answers are written as they come and flushed by the loop's ``TickFlusher`` once the
///   loop has handled the batch of sockets that were ready: one batch's answers go out back
///   to back (the client is woken about once per batch). The last answer's buffer is reused
///   for the next when the socket has let go of it.
/// - The channel's write buffer water marks are the output buffer: NIO reports unsent answers
///   over it as the channel turning unwritable, and the machine stops reading until they drain.
/// - A streamed admin answer (``AdminStream``) is the connection's last: its head goes out
///   close-delimited, then each chunk as a task on this loop iterates them; while the client
///   does not read, chunks are dropped (counted) rather than piled up.
final class ProxyRequestHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// The streamed answer being written (its line is the observer's, once it ends).
    struct ActiveStream {
        let head: ProxyResponse
        var bytesOut: Int
        /// Chunks dropped because the client had not read what was written before.
        var dropped = 0
        var task: Task<Void, Never>?
    }

    /// A chain's answer whose body streams (``ProxyResponse/stream``), being sent part by part.
    struct ActiveBody {
        let stream: BodyStream
        let head: ProxyResponse
        let exchange: AnswerObserver.Exchange?
        var bytesOut: Int
        /// Sent as chunks (its length unknown, to an HTTP/1.1 client).
        let chunked: Bool
        /// Its end is the connection's (its length unknown, to an HTTP/1.0 client).
        let endsWithConnection: Bool
    }

    /// A request body that streams to the chain as it arrives (``IncomingBody/streamed(_:)``):
    /// the stream its consumer pulls, and whether its client waits for `100 Continue`, sent
    /// when the first part is wanted.
    struct ActiveUpload {
        let stream: BodyStream
        /// Holds the stream's source (the stream keeps it weakly).
        let source: UploadSource
        var awaitsContinue: Bool
        /// Its request was handed to the edge (it may have waited its turn).
        var handedOut = false
    }

    /// The source of an upload's ``BodyStream``: tells this handler, on its loop, when a part
    /// is wanted and when the consumer left.
    final class UploadSource: BodyStream.Source, @unchecked Sendable {
        // Used on the connection's loop only (the stream calls its source there).
        let loopBound: NIOLoopBound<(handler: ProxyRequestHandler, context: ChannelHandlerContext)>

        init(_ loopBound: NIOLoopBound<(handler: ProxyRequestHandler, context: ChannelHandlerContext)>) {
            self.loopBound = loopBound
        }

        func bodyStarted() {}

        func bodyDemanded() {
            let (handler, context) = loopBound.value
            handler.uploadDemanded(by: self, context: context)
        }

        func bodyCancelled() {
            let (handler, context) = loopBound.value
            handler.uploadCancelled(by: self, context: context)
        }
    }

    /// A request read whole (or refused for its body size), as the machine queues it. A class
    /// of immutable parts: the machine's queue, its actions and the observer's exchange each
    /// hold it, and a reference passes with one retain where the value's copies and
    /// destructions took some 2,000 instructions per request (callgrind).
    final class Work: Sendable {
        let head: HTTP1RequestParser.Head
        let body: IncomingBody
        /// When it was read whole (or refused for its size).
        let received: NIODeadline

        init(head: HTTP1RequestParser.Head, body: IncomingBody, received: NIODeadline) {
            self.head = head
            self.body = body
            self.received = received
        }
    }

    /// Sent by ``ProxyConnection`` when graceful shutdown's wait is over (`drain_timeout`):
    /// the connection ends now, a request the chain still holds answered 503.
    struct DrainEnded {}

    typealias Machine = ServerConnectionStateMachine<Work>

    /// How long a closing connection keeps discarding input before it is closed for good.
    static let lingerTime = TimeAmount.seconds(2)
    /// How many body bytes the requests waiting for their answers may hold.
    static let maxQueuedBodyBytes = 4 << 20

    private let edge: ProxyEdge
    private let dates: HTTPDateCache
    private let client: ClientAddress?
    /// Who is connected, as the kernel says (``PeerIdentity``), when known.
    private let peer: PeerIdentity?
    /// The port the client connected to: the one its `Host` must name (port 0 in the configuration picks it).
    private let localPort: Int
    private let logger: Logger

    private var machine: Machine
    private var parser: HTTP1RequestParser
    private var timer: Scheduled<Void>?
    private var outputBuffer: ByteBuffer?
    /// The bookkeeping of what this connection answers.
    private var observer: AnswerObserver
    /// The streamed answer being written, if any.
    private var stream: ActiveStream?
    /// The chain's answer whose body is being sent part by part, if any.
    private var body: ActiveBody?
    /// The HTTP minor version of the request being answered (how a body of unknown length is framed).
    private var answeringMinorVersion = 1
    /// The request body streaming to the chain, if any (at most one: nothing after it is read).
    private var upload: ActiveUpload?
    /// The upload of the request being answered was cut for pausing longer than
    /// `body_timeout`: its answer is 408, whatever the chain made of the cut body.
    private var uploadTimedOut = false

    // Guards against re-entry on one call stack (not connection state): an answer can come
    // back while it is being started (a callback that completes at once), and reading can
    // resume while the parse loop runs. The loops below go on with what came in.
    private var parsing = false
    private var startingAnswers = false
    /// The one answer, refusal or end handed out while ``startAnswers(_:context:)`` ran.
    private var deferredStart: Machine.Action?

    /// Flushes this loop's writes at the end of each batch.
    private let flusher: TickFlusher
    /// Runs this loop's answering tasks.
    private let executor: EventLoopTaskExecutor

    init(edge: ProxyEdge, dates: HTTPDateCache, client: ClientAddress?, localPort: Int, limits: ConnectionLimits, eventLoop: any EventLoop,
         logger: Logger, peer: PeerIdentity? = nil) {
        self.peer = peer
        flusher = TickFlusher.for(eventLoop)
        executor = EventLoopTaskExecutor.for(eventLoop)
        parser = HTTP1RequestParser(maxHeadSize: limits.requestHeaders, bodyLimit: edge.requestBodyLimit)
        parser.budget = edge.buffers
        parser.streamsBody = { [edge] head in edge.streamsBody(method: head.method, target: head.target) }
        machine = Machine(limits: Machine.Limits(
            headerTimeout: TimeAmount(limits.headerTimeout), bodyTimeout: TimeAmount(limits.bodyTimeout),
            idleTimeout: TimeAmount(limits.idleTimeout), pipelineDepth: limits.pipelineDepth,
            queuedBodyBytes: Self.maxQueuedBodyBytes, lingerTime: Self.lingerTime))
        self.edge = edge
        self.dates = dates
        self.client = client
        self.localPort = localPort
        self.logger = logger
        observer = AnswerObserver(edge.sinks, client: client, peer: peer, logger: logger)
    }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { perform(machine.channelActive(now: .now()), context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        perform(machine.channelActive(now: .now()), context: context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        // The client left (or the connection was closed): the producer learns it as its stream ends.
        stream?.task?.cancel()
        if let cut = body {
            // Its upstream connection closes with the rest of the body on it (never reused).
            body = nil
            cut.stream.cancel()
            observer.written(cut.exchange, cut.head, bytesOut: cut.bytesOut, now: .now())
        }
        cutUpload(.upstreamUnavailable("The client left before the request's body ended."))
        perform(machine.channelInactive(), context: context)
        parser.stop()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch machine.bytesRead() {
        case .parse:
            if parser.isBetweenRequests {
                // A reload may have changed the limit; a request keeps the one it started with.
                parser.bodyLimit = edge.requestBodyLimit
            }
            parser.append(unwrapInboundIn(data))
            parse(now: .now(), context: context)
        case .keep:
            parser.append(unwrapInboundIn(data))
        case .discard:
            parser.stop()
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        perform(machine.writabilityChanged(writable: context.channel.isWritable, now: .now()), context: context)
        context.fireChannelWritabilityChanged()
    }

    /// Errors from the socket (a reset) end the connection.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        perform(machine.errorCaught(), context: context)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case is ChannelShouldQuiesceEvent:
            perform(machine.quiesce(now: .now()), context: context)
        case ChannelEvent.inputClosed:
            perform(machine.inputClosed(now: .now()), context: context)
        case is DrainEnded:
            cut(context: context)
        default:
            context.fireUserInboundEventTriggered(event)
        }
    }

    // MARK: Reading requests

    /// Parses what arrived, as long as the machine reads requests.
    private func parse(now: NIODeadline, context: ChannelHandlerContext) {
        // Resumed from within the loop below (an answer written at once freed the queue): it goes on.
        guard !parsing else { return }
        parsing = true
        defer { parsing = false }
        while machine.readsRequests {
            // The event as the parser made it (not unwrapped from an optional, which copied it),
            // taken apart by move: its head goes into the request's work without a copy.
            let event: HTTP1RequestParser.Event
            do {
                guard let next = try parser.next() else { break }
                event = next
            } catch {
                let reason = error.kind == .headTooLarge ? "The request headers are larger than the limit." : error.reason
                perform(machine.requestFailed(.malformed(reason), now: now), context: context)
                return
            }
            switch consume event {
            case .waitingForBody:
                perform(machine.continueExpected(), context: context)
            case .request(let head, let body):
                let keepAlive = head.keepAlive, bodyBytes = body.readableBytes
                parsed(Work(head: head, body: .complete(body, reservation: parser.takeReservation()), received: now), keepAlive: keepAlive, bodyBytes: bodyBytes,
                       now: now, context: context)
            case .tooLarge(let head):
                // The parser has stopped: the rest of the body is still on the wire, so this
                // request is the connection's last, whatever answers it (the edge's 413, or any
                // refusal that comes first). The one rule for closing after a refusal.
                parsed(Work(head: head, body: .tooLarge, received: now), keepAlive: false, bodyBytes: 0, now: now, context: context)
            case .overBudget(let head):
                // As for tooLarge: the body is still on the wire.
                parsed(Work(head: head, body: .overBudget, received: now), keepAlive: false, bodyBytes: 0, now: now, context: context)
            case .bodyStreams(let head, let length):
                let source = UploadSource(NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop))
                let stream = BodyStream(eventLoop: context.eventLoop, expectedLength: length, source: source)
                upload = ActiveUpload(stream: stream, source: source, awaitsContinue: head.expectsContinue)
                let work = Work(head: head, body: .streamed(stream), received: now)
                let action = machine.streamedRequestParsed(work, keepAlive: head.keepAlive, now: now)
                if action == .drop { upload = nil }
                perform(action, for: work, context: context)
            case .bodyPart(let part):
                guard let active = upload else { break }
                observer.bodyRead(part.readableBytes)
                perform(machine.uploadPartRead(wanted: active.stream.yield(part), now: now), context: context)
                // The last part: its end is known without waiting for a demand to read on.
                if parser.atStreamedBodyEnd, case .bodyEnd? = try? parser.next() { uploadEnded(now: now, context: context) }
            case .bodyEnd:
                uploadEnded(now: now, context: context)
            }
        }
        perform(machine.inputProgressed(parser.progress, now: now), context: context)
    }

    /// The streamed request body ended whole: its consumer hears it, and reading goes on.
    private func uploadEnded(now: NIODeadline, context: ChannelHandlerContext) {
        guard let ended = upload else { return }
        upload = nil
        ended.stream.finish(nil)
        perform(machine.uploadEnded(now: now), context: context)
    }

    /// The upload's consumer wants a part: `100 Continue` first if its client waits for it,
    /// then read.
    fileprivate func uploadDemanded(by source: UploadSource, context: ChannelHandlerContext) {
        guard let active = upload, active.source === source else { return }
        switch machine.uploadDemanded(now: .now()) {
        case .none:
            break
        case .read(let deadline):
            if active.awaitsContinue {
                upload?.awaitsContinue = false
                context.writeAndFlush(wrapOutboundOut(ByteBuffer(staticString: HTTP1ResponseWriter.continueResponse)), promise: nil)
            }
            if let deadline { schedule(deadline, context: context) }
            perform(.resumeReading, context: context)
        }
    }

    /// The upload's consumer left before its end (an early answer): the rest stays unread,
    /// and the connection ends after the answer.
    fileprivate func uploadCancelled(by source: UploadSource, context: ChannelHandlerContext) {
        guard let active = upload, active.source === source else { return }
        upload = nil
        parser.stop()
        perform(machine.uploadCancelled(), context: context)
    }

    /// Cuts the upload, if one streams: its consumer hears `error` (the upstream connection
    /// carrying it closes), and nothing more of it is read.
    private func cutUpload(_ error: ProxyError) {
        guard let cut = upload else { return }
        upload = nil
        parser.stop()
        cut.stream.finish(error)
    }

    private func parsed(_ work: Work, keepAlive: Bool, bodyBytes: Int, now: NIODeadline, context: ChannelHandlerContext) {
        perform(machine.requestParsed(work, keepAlive: keepAlive, bodyBytes: bodyBytes, now: now), for: work, context: context)
    }

    /// Answers a request just read, queues it, or drops it, as the machine says.
    private func perform(_ action: Machine.ParsedAction, for work: Work, context: ChannelHandlerContext) {
        switch action {
        case .answer(let pause):
            if pause { setAutoRead(false, context: context) }
            answer(work, context: context)
        case .wait(let pause):
            if pause { setAutoRead(false, context: context) }
        case .drop:
            break
        }
    }

    // MARK: Performing actions

    private func perform(_ action: Machine.Action, context: ChannelHandlerContext) {
        switch action {
        case .none:
            break
        case .answer, .refuse, .end, .endStream:
            startAnswers(action, context: context)
        case .sendContinue:
            context.writeAndFlush(wrapOutboundOut(ByteBuffer(staticString: HTTP1ResponseWriter.continueResponse)), promise: nil)
        case .pauseReading:
            setAutoRead(false, context: context)
        case .resumeReading:
            parse(now: .now(), context: context)
            if machine.readsRequests { setAutoRead(true, context: context) }
        case .armTimer(let deadline):
            schedule(deadline, context: context)
        case .linger(let until):
            schedule(until, context: context)
            // Keep reading (and dropping), even if reads were paused, so that the client's close is noticed.
            setAutoRead(true, context: context)
            context.read()
        case .close:
            // Answers waiting for the end of the batch (TickFlusher) go out first.
            context.flush()
            context.close(promise: nil)
        case .cancelTimer:
            timer?.cancel()
            timer = nil
        case .readBody:
            body?.stream.read()
        case .cutUpload:
            cutUpload(.upstreamUnavailable("The request's body was cut: the client left or sent a malformed body."))
        }
    }

    /// Answers the request just read, then what the machine hands out next (see ``startAnswers(_:context:)``).
    private func answer(_ work: Work, context: ChannelHandlerContext) {
        guard !startingAnswers else {
            deferStart(.answer(work))
            return
        }
        startingAnswers = true
        defer { startingAnswers = false }
        runAnswers(from: start(work, context: context), context: context)
    }

    /// Answers requests in order, for as long as the chain answers at once. A loop, not a
    /// recursion: a client may pipeline many requests answered at once (cache hits), each of
    /// which would otherwise add frames.
    private func startAnswers(_ first: Machine.Action, context: ChannelHandlerContext) {
        guard !startingAnswers else {
            deferStart(first)
            return
        }
        startingAnswers = true
        defer { startingAnswers = false }
        runAnswers(from: first, context: context)
    }

    /// Handed out while ``runAnswers(from:context:)`` runs (an answer that came back at once): it goes on with it.
    private func deferStart(_ action: Machine.Action) {
        assert(deferredStart == nil, "two answers started at once")
        deferredStart = action
    }

    private func runAnswers(from first: Machine.Action, context: ChannelHandlerContext) {
        var action = first
        while true {
            switch action {
            case .answer(let work):
                action = start(work, context: context)
            case .refuse(let refusal):
                let error = switch refusal {
                case .malformed(let reason): ProxyError.badRequest(reason)
                case .timedOut: ProxyError(.requestTimeout, "The request did not arrive in time.")
                }
                // A request refused once its head was read whole keeps the id it came with.
                let interrupted = parser.interrupted
                let requestID = interrupted.map { ProxyEdge.requestID($0.head.fields) } ?? RequestID.generate()
                let response = ProxyEdge.stamped(error.response, requestID)
                let bytes = write(response, method: interrupted?.head.method ?? .get, close: true, context: context)
                observer.refused(interrupted, route: edge.routeTemplate, response, bytesOut: bytes, now: .now())
                action = .none
            case .end:
                sendLast(context.channel.allocator.buffer(capacity: 0), context: context)
                action = .none
            case .endStream:
                // Its line is logged once its task sees the cancellation (streamEnded).
                stream?.task?.cancel()
                sendLast(context.channel.allocator.buffer(capacity: 0), context: context)
                action = .none
            case .none:
                guard let deferred = deferredStart else { return }
                deferredStart = nil
                action = deferred
            default:
                perform(action, context: context)
                action = .none
            }
        }
    }

    /// Hands one request to the edge; what next if it was answered at once.
    private func start(_ work: Work, context: ChannelHandlerContext) -> Machine.Action {
        answeringMinorVersion = work.head.minorVersion
        if case .streamed = work.body { upload?.handedOut = true }
        let observed = observer.started(work)
        switch edge.begin(method: work.head.method, target: work.head.target, fields: work.head.fields, body: work.body, client: client,
                          authority: work.head.authority, localPort: localPort, record: observed?.record, requestID: observed?.requestID,
                          peer: peer) {
        case .answered(let response):
            // Refused by the edge or answered at once by the chain: no task needed.
            return written(response, method: work.head.method, context: context)
        case .waiting(let pending):
            answerLater(pending, method: work.head.method, context: context)
            return .none
        case .streamed(let answer):
            return streamed(answer, method: work.head.method, context: context)
        }
    }

    // MARK: Streamed answers

    /// Writes a streamed answer's head and starts writing its chunks as they come; a HEAD
    /// gets the head alone, as any answer (its connection goes on).
    private func streamed(_ answer: StreamedAnswer, method: HTTPRequest.Method, context: ChannelHandlerContext) -> Machine.Action {
        guard answer.chunks != nil else {
            return written(answer.head, method: method, streamed: true, context: context)
        }
        let now = NIODeadline.now()
        let exchange = observer.takeAnswering()
        switch machine.streamReady(now: now) {
        case .start:
            var buffer = context.channel.allocator.buffer(capacity: 512 + answer.head.body.readableBytes)
            HTTP1ResponseWriter.write(answer.head, method: .get, close: true, streamed: true, date: dates.now(), into: &buffer)
            stream = ActiveStream(head: answer.head, bytesOut: buffer.readableBytes)
            observer.streamStarted(exchange)
            context.write(wrapOutboundOut(buffer), promise: nil)
            flusher.flushSoon(context)
            // Read (and discard) on, even if reading was paused: the client's close ends the stream.
            setAutoRead(true, context: context)
            context.read()
            let loopBound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
            let eventLoop = context.eventLoop
            stream?.task = answer.run(on: executor, chunk: { chunk in
                Self.onLoop(eventLoop, loopBound) { $0.streamChunk(chunk, context: $1) }
            }, ended: {
                Self.onLoop(eventLoop, loopBound) { $0.streamEnded(context: $1) }
            })
            return .none
        case .headOnly:
            // The connection is ending: the head alone, as its last answer.
            answer.stop()
            let bytes = write(answer.head, method: .get, close: true, streamed: true, context: context)
            observer.written(exchange, answer.head, bytesOut: bytes, now: now)
            return machine.answerWritten(now: now)
        case .discard:
            answer.stop()
            observer.discarded(exchange, answer.head, now: now)
            return .none
        }
    }

    /// Runs `body` with the handler on its loop (the stream's task runs there already, unless its loop is gone).
    private static func onLoop(_ eventLoop: any EventLoop, _ loopBound: NIOLoopBound<(handler: ProxyRequestHandler, context: ChannelHandlerContext)>,
                               _ body: @escaping @Sendable (ProxyRequestHandler, ChannelHandlerContext) -> Void) {
        if eventLoop.inEventLoop {
            body(loopBound.value.handler, loopBound.value.context)
        } else {
            eventLoop.execute { body(loopBound.value.handler, loopBound.value.context) }
        }
    }

    /// A chunk of the stream: written while the client reads, dropped while it does not.
    private func streamChunk(_ chunk: ByteBuffer, context: ChannelHandlerContext) {
        guard stream != nil else { return }
        switch machine.chunkReady() {
        case .write:
            stream?.bytesOut += chunk.readableBytes
            // The channel may turn unwritable here (channelWritabilityChanged, before this returns).
            context.write(wrapOutboundOut(chunk), promise: nil)
            flusher.flushSoon(context)
        case .drop:
            stream?.dropped += 1
        case .stop:
            stream?.task?.cancel()
        }
    }

    /// The stream's iteration ended (its chunks finished, or it was stopped): its line, and the end of the answer.
    private func streamEnded(context: ChannelHandlerContext) {
        guard let ended = stream else { return }
        stream = nil
        if ended.dropped > 0 {
            logger.debug("a streamed answer dropped chunks its client did not read in time", metadata: [
                "request_id": .string(ended.head.headers[.xRequestID] ?? ""), "dropped_chunks": .stringConvertible(ended.dropped),
            ])
        }
        observer.streamEnded(ended.head, bytesOut: ended.bytesOut)
        perform(machine.streamFinished(now: .now()), context: context)
    }

    /// Where an answer that comes later is written: this handler, on its loop. A value, not a
    /// closure: the callback or the task that carries it needs no allocation of its own for it.
    struct Delivery: AnswerDelivery {
        let loopBound: NIOLoopBound<(handler: ProxyRequestHandler, context: ChannelHandlerContext)>
        let eventLoop: any EventLoop
        let method: HTTPRequest.Method

        func deliver(_ response: ProxyResponse) {
            if eventLoop.inEventLoop {
                loopBound.value.handler.finish(response, method: method, context: loopBound.value.context)
            } else {
                eventLoop.execute { [loopBound, method] in
                    loopBound.value.handler.finish(response, method: method, context: loopBound.value.context)
                }
            }
        }
    }

    /// Runs the chain without a task where it can, else in a task; its answer is written when it comes.
    private func answerLater(_ pending: consuming ProxyEdge.Pending, method: HTTPRequest.Method, context: ChannelHandlerContext) {
        let delivery = Delivery(loopBound: NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop),
                                eventLoop: context.eventLoop, method: method)
        // A chain planned to answer without a task (the upstream origin, maybe behind
        // latency_log) calls back on this loop: no task to create, suspend and resume.
        // Either way the answer may come (inside startAnswers' loop) before this returns.
        guard let pending = edge.completeWithoutTask(pending, to: delivery) else { return }
        let edge = edge, handed = pending.handOver()
        // The task runs once and ends the request's lease as it completes it.
        Task.immediate(executorPreference: executor) {
            delivery.deliver(await edge.complete(handed))
        }
    }

    /// An answer that came later: written, then what the machine says.
    private func finish(_ response: ProxyResponse, method: HTTPRequest.Method, context: ChannelHandlerContext) {
        perform(written(response, method: method, context: context), context: context)
    }

    /// Writes the answer the edge gave (unless the connection is gone); what next.
    private func written(_ response: ProxyResponse, method: HTTPRequest.Method, streamed: Bool = false,
                         context: ChannelHandlerContext) -> Machine.Action {
        if uploadTimedOut {
            // Whatever the chain made of a body cut for its pause, the client paused: 408.
            // (Written in its place, not assigned over a copy: copying every answer cost a
            // retain and a release of each of its parts.)
            uploadTimedOut = false
            response.stream?.cancel()
            let timedOut = ProxyEdge.stamped(ProxyError(.requestTimeout, "The request did not arrive in time.").response,
                                             response.headers[.xRequestID] ?? RequestID.generate())
            return written(timedOut, method: method, streamed: streamed, context: context)
        }
        // An answer before the end of the body that streams to the chain (an early 413, a
        // refusal by the edge or a decorator): the rest of the body stays unread, and the
        // connection ends after this answer (the machine says so).
        if upload?.handedOut == true { cutUpload(.upstreamUnavailable("The request was answered before its body ended.")) }
        if let stream = response.stream {
            guard method != .head else {
                // No body goes out for HEAD (an upstream answers none: this is for safety).
                stream.cancel()
                var head = response
                head.stream = nil
                return written(head, method: method, context: context)
            }
            return sendBody(response, stream, context: context)
        }
        let now = NIODeadline.now()
        let exchange = observer.takeAnswering()
        switch machine.answerReady(now: now) {
        case .write(let close):
            // Observed before it can reach the client: a last answer is flushed at once, and a
            // client that then asks again on another connection must find this line logged first.
            write(response, method: method, close: close, streamed: streamed, context: context) { bytes in
                observer.written(exchange, response, bytesOut: bytes, now: now)
            }
            return machine.answerWritten(now: now)
        case .discard:
            // The client left: logged with nothing sent.
            observer.discarded(exchange, response, now: now)
            return .none
        }
    }

    // MARK: Streamed bodies of the chain's answers

    /// Writes the head of an answer whose body streams, then its parts one at a time, each
    /// asked for while the output takes more: a client that does not read stops its upstream
    /// being read (``BodyStream``).
    private func sendBody(_ response: ProxyResponse, _ stream: BodyStream, context: ChannelHandlerContext) -> Machine.Action {
        let now = NIODeadline.now()
        let exchange = observer.takeAnswering()
        switch machine.bodyStreamReady(now: now) {
        case .discard:
            stream.cancel()
            observer.discarded(exchange, response, now: now)
            return .none
        case .start(let close):
            let length = stream.expectedLength
            let chunked = length == nil && answeringMinorVersion >= 1
            let endsWithConnection = length == nil && !chunked
            var buffer = context.channel.allocator.buffer(capacity: 512)
            HTTP1ResponseWriter.write(response, method: .get, close: close || endsWithConnection, streamed: true, length: length, chunked: chunked,
                                      date: dates.now(), into: &buffer)
            body = ActiveBody(stream: stream, head: response, exchange: exchange, bytesOut: buffer.readableBytes, chunked: chunked,
                              endsWithConnection: endsWithConnection)
            context.write(wrapOutboundOut(buffer), promise: nil)
            flusher.flushSoon(context)
            let loopBound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
            let eventLoop = context.eventLoop
            stream.start { event in
                Self.onLoop(eventLoop, loopBound) { $0.bodyEvent(event, context: $1) }
            }
            if machine.bodyPartWritten() { stream.read() }
            return .none
        }
    }

    /// A part, the end, or the cut of the body being sent.
    private func bodyEvent(_ event: BodyStream.Event, context: ChannelHandlerContext) {
        guard let active = body else { return }
        switch event {
        case .part(let part):
            guard part.readableBytes > 0 else {
                if machine.bodyPartWritten() { active.stream.read() }
                return
            }
            var bytes = part.readableBytes
            if active.chunked {
                var size = context.channel.allocator.buffer(capacity: 18)
                HTTP1ResponseWriter.writeChunkHead(size: part.readableBytes, into: &size)
                bytes += size.readableBytes + 2
                context.write(wrapOutboundOut(size), promise: nil)
                context.write(wrapOutboundOut(part), promise: nil)
                context.write(wrapOutboundOut(ByteBuffer(staticString: "\r\n")), promise: nil)
            } else {
                // The channel may turn unwritable here (channelWritabilityChanged, before this returns).
                context.write(wrapOutboundOut(part), promise: nil)
            }
            body?.bytesOut += bytes
            flusher.flushSoon(context)
            if machine.bodyPartWritten() { active.stream.read() }
        case .end:
            body = nil
            var total = active.bytesOut
            if active.chunked {
                var last = context.channel.allocator.buffer(capacity: 5)
                HTTP1ResponseWriter.writeChunkHead(size: 0, into: &last)
                total += last.readableBytes
                context.write(wrapOutboundOut(last), promise: nil)
                flusher.flushSoon(context)
            }
            let now = NIODeadline.now()
            observer.written(active.exchange, active.head, bytesOut: total, now: now)
            // A body framed by the connection's end ends it; any other lets the connection go on.
            perform(active.endsWithConnection ? machine.bodyFailed() : machine.bodyEnded(now: now), context: context)
        case .failed(let error):
            body = nil
            logger.warning("an answer's body was cut: connection closed", metadata: [
                "request_id": .string(active.head.headers[.xRequestID] ?? ""), "error": .string(error.code.rawValue),
                "detail": .string(error.detail ?? error.message),
            ])
            observer.written(active.exchange, active.head, bytesOut: active.bytesOut, now: .now())
            perform(machine.bodyFailed(), context: context)
        }
    }

    /// Writes one answer, or the last one and then the end of the connection; how many bytes.
    /// `streamed`: the head of a streamed answer (no `Content-Length`).
    @discardableResult
    private func write(_ response: ProxyResponse, method: HTTPRequest.Method, close: Bool, streamed: Bool = false,
                       context: ChannelHandlerContext, beforeSending: (Int) -> Void = { _ in }) -> Int {
        // The last answer's buffer, if the socket has let go of it (the usual case: small
        // answers are written at once): no allocation per answer.
        var buffer = outputBuffer ?? context.channel.allocator.buffer(capacity: 512 + response.body.readableBytes)
        outputBuffer = nil
        buffer.clear()
        HTTP1ResponseWriter.write(response, method: method, close: close, streamed: streamed, date: dates.now(), into: &buffer)
        let bytes = buffer.readableBytes
        beforeSending(bytes)
        if close {
            sendLast(buffer, context: context)
        } else {
            // Flushed with the other answers of this batch (see TickFlusher). The channel may
            // turn unwritable here (channelWritabilityChanged, before this returns).
            context.write(wrapOutboundOut(buffer), promise: nil)
            flusher.flushSoon(context)
            // Unique again once flushed and written: the next answer reuses its storage (if
            // NIO still holds it, clearing it copies, which costs what a new one would).
            outputBuffer = buffer
        }
        return bytes
    }

    /// Sends `buffer` (the last answer, or nothing after the answers written), then shuts
    /// the output down: the client sees the end of the answers, and the machine lingers.
    private func sendLast(_ buffer: ByteBuffer, context: ChannelHandlerContext) {
        let loopBound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(buffer)).whenComplete { result in
            let (handler, context) = loopBound.value
            guard case .success = result, context.channel.isActive else {
                handler.perform(handler.machine.errorCaught(), context: context)
                return
            }
            context.close(mode: .output).whenComplete { result in
                let (handler, context) = loopBound.value
                switch result {
                case .success: handler.perform(handler.machine.outputShut(now: .now()), context: context)
                case .failure: handler.perform(handler.machine.errorCaught(), context: context)
                }
            }
        }
    }

    // MARK: Shutdown's end

    /// Graceful shutdown's wait is over: a request whose answer has not begun gets 503
    /// `shutting_down` (logged, in the daemon log and the access log), the requests read behind
    /// it are logged as never answered, and the connection closes.
    private func cut(context: ChannelHandlerContext) {
        cutUpload(.upstreamUnavailable("Veneer stopped before the request's body ended."))
        let cut = observer.takeAnswering()
        switch machine.drainEnded() {
        case .none:
            return
        case .close(let unanswered):
            observer.cut(cut, answeredWith: nil, bytesOut: 0, unanswered: unanswered)
            context.flush()
            context.close(promise: nil)
        case .refuse(let unanswered):
            let response = ProxyEdge.stamped(Self.shuttingDown, cut?.requestID ?? RequestID.generate())
            var buffer = context.channel.allocator.buffer(capacity: 512)
            HTTP1ResponseWriter.write(response, method: cut?.work.head.method ?? .get, close: true, date: dates.now(), into: &buffer)
            observer.cut(cut, answeredWith: response, bytesOut: buffer.readableBytes, unanswered: unanswered)
            let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
            context.writeAndFlush(wrapOutboundOut(buffer)).whenComplete { _ in loopBound.value.close(promise: nil) }
        }
    }

    /// The 503 of a request still unanswered when `drain_timeout` ran out.
    static let shuttingDown = ProxyResponse.json(
        .serviceUnavailable,
        ByteBuffer(string: #"{"error":"shutting_down","message":"Veneer stopped before this request was answered (drain_timeout); "#
            + #"it may have reached the upstream."}"# + "\n"),
        headers: [.cacheControl: "no-store"])

    // MARK: Timer and reading

    private func schedule(_ deadline: NIODeadline, context: ChannelHandlerContext) {
        timer?.cancel()
        let loopBound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(deadline: deadline) {
            let (handler, context) = loopBound.value
            handler.timer = nil
            handler.timerFired(context: context)
        }
    }

    private func timerFired(context: ChannelHandlerContext) {
        guard context.channel.isActive else { return }
        switch machine.timerFired(now: .now()) {
        case .none:
            break
        case .close:
            logger.trace("closing a connection that waited too long")
            perform(.close, context: context)
        case .rearm(let deadline):
            schedule(deadline, context: context)
        case .refuse(let refusal, let deadline):
            schedule(deadline, context: context)
            parser.stop()
            startAnswers(.refuse(refusal), context: context)
        case .cutUpload(let deadline):
            schedule(deadline, context: context)
            uploadTimedOut = true
            cutUpload(ProxyError(.requestTimeout, "The request's body paused longer than limits.body_timeout."))
        }
    }

    /// `autoRead` adds or drops the socket's read interest; a closed channel refuses it, which needs no handling.
    private func setAutoRead(_ on: Bool, context: ChannelHandlerContext) {
        try? context.channel.syncOptions?.setOption(.autoRead, value: on)
    }
}
