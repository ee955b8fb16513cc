import DequeModule
import NIOCore
import VeneerHTTP1

/// The life of one client connection as a pure value: what is being read, what is being
/// answered, and how the connection ends. ``ProxyRequestHandler`` feeds it events and performs
/// the actions it returns; the machine has no channel and no clock (times come in as
/// arguments), so every transition is tested without a socket.
///
/// A connection is read and answered at once (HTTP/1.1 pipelining), so an open connection is
/// a pair: the ``Input`` (between requests, in a head, in a body, or paused) and the
/// ``Output`` (idle, answering the oldest request, or blocked by answers the client has not
/// read). Requests read whole wait in order in a queue behind the one being answered.
///
/// What bounds a connection:
/// - a head must arrive whole within `headerTimeout` of its first byte, and each part of a body
///   within `bodyTimeout` of the one before, else 408 and close;
/// - with no request begun and nothing to answer, it is closed silently after `idleTimeout`
///   (and so is one whose client has read no answer byte for that long);
/// - reading stops while `pipelineDepth` requests (or `queuedBodyBytes` of their bodies) wait
///   for answers, and while the unsent answers exceed the channel's write buffer (NIO reports
///   it as writability): a client that never reads costs bounded memory.
///
/// A streamed answer (server-sent events, ``AdminStream``) is always a connection's last: once
/// its head is written the connection is ``State/streaming(blockedSince:)`` until the stream
/// ends, the client leaves or the server shuts down. No idle or head deadline cuts a stream
/// that is being written; one whose client reads nothing for `idleTimeout` is closed.
struct ServerConnectionStateMachine<Request> {
    /// What a connection lives by (from `limits` and `idle_timeout`).
    struct Limits: Sendable, Equatable {
        /// How long a whole request head may take, from its first byte.
        var headerTimeout: TimeAmount
        /// How long a body may pause between two reads.
        var bodyTimeout: TimeAmount
        /// How long a connection with nothing to do stays open.
        var idleTimeout: TimeAmount
        /// How many requests may wait for their answers, the one being answered included.
        var pipelineDepth: Int
        /// How many body bytes the waiting requests may hold.
        var queuedBodyBytes: Int
        /// How long a closing connection discards input after its last answer.
        var lingerTime: TimeAmount
    }

    /// Why a request is answered without the chain, and the connection closed after it.
    enum Refusal: Sendable, Equatable {
        /// Not valid HTTP/1.1 (400 `bad_request`), with the reason in words.
        case malformed(String)
        /// A head or a body too slow to arrive (408 `request_timeout`).
        case timedOut
    }

    /// How far the next request has arrived (what the parser holds of it).
    typealias Progress = HTTP1RequestParser.Progress

    /// The reading side of an open connection.
    enum Input: Sendable, Equatable {
        /// Nothing of a next request has arrived; the last input came at `since`.
        case waiting(since: NIODeadline)
        /// Part of a head, whose first byte came at `started`.
        case head(started: NIODeadline)
        /// A head read and part of its body, the last part at `lastRead`.
        case body(lastRead: NIODeadline)
        /// Not read: the queue is full or the client does not read its answers. No input
        /// deadline runs, as the wait is Veneer's.
        case paused
        /// The body of the request being answered streams to the chain as it arrives
        /// (``streamedRequestParsed(_:keepAlive:now:)``): the socket is read only while the
        /// body's consumer wants a part (`wanted`), and a part must come within `bodyTimeout`
        /// of the demand or of the part before (`since`); while nothing is wanted no deadline
        /// runs (the wait is the upstream's). `last`: the connection ends after this request.
        case streamingBody(since: NIODeadline, wanted: Bool, last: Bool)
    }

    /// The answering side of a connection that still answers.
    enum Output: Sendable, Equatable {
        /// Nothing being answered; the last answer went out (or the connection opened) at `since`.
        case idle(since: NIODeadline)
        /// The chain has the oldest request. `writable` false: its answer will find the output
        /// blocked.
        case answering(keepAlive: Bool, writable: Bool)
        /// The unsent answers exceed the output buffer, since `since`: nothing more is answered
        /// until the client reads.
        case blocked(since: NIODeadline)
        /// The head of the chain's answer is out and its body streams (``VeneerCore/BodyStream``),
        /// one part asked for at a time while the output takes more. `keepAlive` false: the
        /// connection ends after it. `blockedSince`: since when the client has not read enough
        /// for the output to take another part (no part is asked for meanwhile).
        case sendingBody(keepAlive: Bool, blockedSince: NIODeadline?)
    }

    /// Where the connection is.
    enum State: Sendable, Equatable {
        /// Not active yet.
        case initialized
        /// Reading requests and answering them in order.
        case open(Input, Output)
        /// Graceful shutdown came while a body was arriving: that request is read and answered
        /// (after the ones before it), then the connection closes.
        case quiescing(Input, Output)
        /// No more requests are read (input discarded): the queued ones are answered, the last
        /// with `Connection: close`, or else `final` is; then the output is shut.
        /// `inputEnded`: the client has closed its side already.
        case closing(Output, final: Refusal?, inputEnded: Bool)
        /// A streamed answer's body is being written, its head sent with `Connection: close`:
        /// no more requests are read (input is discarded, but read, so that the client's close
        /// is seen). `blockedSince`: since when the client has read too little for the output
        /// to take more (its chunks are dropped meanwhile).
        case streaming(blockedSince: NIODeadline?)
        /// The last answer is being sent, since `since`; then the output is shut.
        case closingOutput(since: NIODeadline, inputEnded: Bool)
        /// The output is shut; input is discarded until the client closes or `until`.
        case lingering(until: NIODeadline)
        /// Closed (or closing): every event is ignored.
        case closed
    }

    /// What the handler does after most events.
    enum Action {
        /// Nothing.
        case none
        /// Hand this request to the chain; its answer comes back through ``answerReady(now:)``.
        case answer(Request)
        /// Write this refusal with `Connection: close`, then ``outputShut(now:)`` once it is sent.
        case refuse(Refusal)
        /// Nothing more to answer: once what was written is sent, shut the output and report ``outputShut(now:)``.
        case end
        /// Stop iterating the stream being written (its producer's `onTermination` runs), then
        /// as for ``end``.
        case endStream
        /// Send `100 Continue`.
        case sendContinue
        /// Stop reading the socket; keep what was read.
        case pauseReading
        /// Parse what was kept, then read the socket again.
        case resumeReading
        /// (Re)schedule the one timer at this deadline; ``timerFired(now:)`` when it is due.
        case armTimer(NIODeadline)
        /// Read (and discard) the input again, with the timer at `until`.
        case linger(until: NIODeadline)
        /// Flush what was written and close.
        case close
        /// Cancel the timer: the channel is gone.
        case cancelTimer
        /// Ask the streamed body being sent for its next part (the output takes more again).
        case readBody
        /// Cut the request body that streams to the chain (the client left, paused too long or
        /// sent a malformed chunk): its consumer hears it failed (the upstream connection
        /// carrying it closes), and nothing more is read.
        case cutUpload
    }

    /// What to do when the consumer of a streamed request body wants its next part.
    enum UploadDemandAction: Sendable, Equatable {
        /// Nothing (the body is not being read any more).
        case none
        /// Parse what was kept, read the socket again, and make sure the timer fires by
        /// `deadline` (``timerFired(now:)``) should the client pause.
        case read(armTimer: NIODeadline?)
    }

    /// What to do with an answer of the chain whose body streams.
    enum BodyStreamAction: Sendable, Equatable {
        /// Write its head (with `Connection: close` when `close`), then ask for its first part;
        /// ``bodyPartWritten()`` after each part, ``bodyEnded(now:)`` at its end.
        case start(close: Bool)
        /// Cancel the stream: the connection is gone.
        case discard
    }

    /// What to do with a request read whole.
    enum ParsedAction: Sendable, Equatable {
        /// Hand it to the chain now (the handler holds it: not copied through here); then as
        /// for ``Action/answer(_:)``. `pauseReading`: stop reading the socket too.
        case answer(pauseReading: Bool)
        /// It waits its turn; `pauseReading`: stop reading the socket too.
        case wait(pauseReading: Bool)
        /// It is not answered (the connection is ending).
        case drop
    }

    /// What to do with an answer the chain gave.
    enum AnswerAction: Sendable, Equatable {
        /// Write it, with `Connection: close` when `close` (then ``outputShut(now:)`` once sent);
        /// then report ``answerWritten(now:)``.
        case write(close: Bool)
        /// Drop it: the connection is gone.
        case discard
    }

    /// What to do with a streamed answer the edge gave for the request being answered.
    enum StreamAction: Sendable, Equatable {
        /// Write its head (it is the last answer: `Connection: close`, no `Content-Length`),
        /// keep reading (and discarding) input, and iterate its chunks: ``chunkReady()`` for
        /// each, ``streamFinished(now:)`` when they end.
        case start
        /// The connection is ending (graceful shutdown, or the client closed its side): write
        /// its head alone as the last answer (then ``outputShut(now:)``), and stop the stream.
        case headOnly
        /// Stop the stream: the connection is gone.
        case discard
    }

    /// What to do with a chunk of the stream being written.
    enum ChunkAction: Sendable, Equatable {
        /// Write it (and flush it soon).
        case write
        /// Drop it: the client has not read what was written before.
        case drop
        /// Drop it and stop iterating: the stream is over.
        case stop
    }

    /// What to do with the bytes just read.
    enum ReadAction: Sendable, Equatable {
        /// Give them to the parser and parse.
        case parse
        /// Give them to the parser; parse later (reading is paused).
        case keep
        /// Drop them (no more requests are read).
        case discard
    }

    /// What to do when the timer fires. While the connection lives the timer is always set
    /// again, so that every state that waits on the client has a deadline.
    enum TimerAction: Sendable, Equatable {
        /// Nothing (the connection is closed).
        case none
        /// Flush what was written and close.
        case close
        /// Set the timer again at this deadline.
        case rearm(NIODeadline)
        /// A head or body came too slowly: write this refusal with `Connection: close` (as for
        /// ``Action/refuse(_:)``), and set the timer again.
        case refuse(Refusal, rearm: NIODeadline)
        /// A streamed request body paused longer than `bodyTimeout`: cut it (as for
        /// ``Action/cutUpload``); its request's answer ends the connection. Set the timer again.
        case cutUpload(rearm: NIODeadline)
    }

    /// What to do when graceful shutdown's wait is over (`drain_timeout`): the connection
    /// ends now, whatever it was doing.
    enum CutAction {
        /// Nothing: the connection is closed already.
        case none
        /// The request being answered has had no byte of its answer: write a 503 with
        /// `Connection: close`, then close. `unanswered`: the requests read whole behind it,
        /// which get no answer.
        case refuse(unanswered: [Request])
        /// Close now (nothing being answered, or an answer's head is out already);
        /// `unanswered`: the requests read whole that get no answer.
        case close(unanswered: [Request])
    }

    private(set) var state: State = .initialized
    /// Requests read whole, in order, waiting behind the one being answered.
    /// `streams`: its body streams and is still on the wire (nothing after it is read yet).
    private var queue = Deque<(request: Request, keepAlive: Bool, bodyBytes: Int, streams: Bool)>()
    private var queuedBodyBytes = 0
    /// The deadline the handler's timer is set for, if any.
    private(set) var armedTimer: NIODeadline?
    /// Graceful shutdown was asked for: a stream that would begin now ends at once. (Not a
    /// state of its own: a closing connection looks the same, whoever closes it.)
    private(set) var quiesced = false
    /// Whether a request was read whole on this connection yet. One that has had none when
    /// graceful shutdown comes was just accepted, and its client is sending its first request
    /// (a restart under socket activation accepts from the queue until the last moment): it
    /// gets `headerTimeout` to arrive, and is answered, rather than being closed unread.
    private var readAny = false
    /// Until when a connection quiesced before its first request waits for it.
    private var firstRequestGrace: NIODeadline?
    let limits: Limits

    init(limits: Limits) {
        precondition(limits.pipelineDepth >= 1, "pipeline depth must be at least 1")
        self.limits = limits
    }

    /// How many requests wait behind the one being answered.
    var queuedRequests: Int { queue.count }

    /// Whether requests are read and parsed now.
    var readsRequests: Bool {
        switch state {
        case .open(let input, _), .quiescing(let input, _):
            if case .streamingBody(_, let wanted, _) = input { return wanted }
            return input != .paused
        case .initialized, .closing, .streaming, .closingOutput, .lingering, .closed: return false
        }
    }

    // MARK: Events

    /// The channel became active.
    mutating func channelActive(now: NIODeadline) -> Action {
        guard case .initialized = state else { return .none }
        state = .open(.waiting(since: now), .idle(since: now))
        return arm(now + limits.idleTimeout)
    }

    /// Bytes were read from the socket.
    func bytesRead() -> ReadAction {
        switch state {
        case .open(let input, _), .quiescing(let input, _):
            if case .streamingBody(_, let wanted, _) = input { return wanted ? .parse : .keep }
            return input == .paused ? .keep : .parse
        case .initialized, .closing, .streaming, .closingOutput, .lingering, .closed: return .discard
        }
    }

    /// The parser read a request whole, at `now`. `keepAlive`: the request allows another after it.
    mutating func requestParsed(_ request: Request, keepAlive: Bool, bodyBytes: Int, now: NIODeadline) -> ParsedAction {
        guard let current = reading else { return .drop }
        readAny = true
        var output = current.output
        // Its head and body are done: a head that follows has a deadline of its own.
        var input = current.input == .paused ? Input.paused : .waiting(since: now)
        let last = !keepAlive || current.quiescing
        if case .idle = output, queue.isEmpty {
            output = .answering(keepAlive: !last, writable: true)
            if last {
                state = .closing(output, final: nil, inputEnded: false)
                return .answer(pauseReading: false)
            }
            let full = 1 >= limits.pipelineDepth
            if full { input = .paused }
            state = .open(input, output)
            return .answer(pauseReading: full)
        }
        queue.append((request, !last, bodyBytes, false))
        queuedBodyBytes += bodyBytes
        if last {
            state = .closing(output, final: nil, inputEnded: false)
            return .wait(pauseReading: false)
        }
        let inFlight = queue.count + (output.isAnswering ? 1 : 0)
        let full = inFlight >= limits.pipelineDepth || queuedBodyBytes >= limits.queuedBodyBytes
        let pause = full && input != .paused
        if full { input = .paused }
        state = .open(input, output)
        return .wait(pauseReading: pause)
    }

    // MARK: Request bodies that stream

    /// The parser read the head of a request whose body streams, at `now`. With nothing
    /// answered before it, the request goes to the chain at once and its body is read as the
    /// chain's consumer asks for parts (reading pauses until the first demand,
    /// ``uploadDemanded(now:)``). Otherwise it waits its turn with reading paused: nothing
    /// after it can be read before its body, which stays on the wire (in the socket's buffer)
    /// rather than in memory.
    mutating func streamedRequestParsed(_ request: Request, keepAlive: Bool, now: NIODeadline) -> ParsedAction {
        guard let current = reading else { return .drop }
        readAny = true
        let last = !keepAlive || current.quiescing
        if case .idle = current.output, queue.isEmpty {
            setReading(.streamingBody(since: now, wanted: false, last: last), .answering(keepAlive: !last, writable: true),
                       quiescing: current.quiescing)
            return .answer(pauseReading: true)
        }
        queue.append((request, !last, 0, true))
        setReading(.paused, current.output, quiescing: current.quiescing)
        return .wait(pauseReading: current.input != .paused)
    }

    /// The consumer of the streamed request body wants a part, at `now`.
    mutating func uploadDemanded(now: NIODeadline) -> UploadDemandAction {
        guard let (input, output, quiescing) = reading, case .streamingBody(_, let wanted, let last) = input else { return .none }
        guard !wanted else { return .none }
        setReading(.streamingBody(since: now, wanted: true, last: last), output, quiescing: quiescing)
        let deadline = now + limits.bodyTimeout
        if let armedTimer, armedTimer <= deadline { return .read(armTimer: nil) }
        armedTimer = deadline
        return .read(armTimer: deadline)
    }

    /// A part of the streamed request body was read and handed on at `now`; `wanted`: its
    /// consumer still wants one (the stream had none held). Not wanted: stop reading.
    mutating func uploadPartRead(wanted: Bool, now: NIODeadline) -> Action {
        guard let (input, output, quiescing) = reading, case .streamingBody(_, let wasWanted, let last) = input else { return .none }
        setReading(.streamingBody(since: now, wanted: wanted, last: last), output, quiescing: quiescing)
        return !wanted && wasWanted ? .pauseReading : .none
    }

    /// The streamed request body ended whole at `now`: the next request may be read (after
    /// this one is answered, when it was the connection's last).
    mutating func uploadEnded(now: NIODeadline) -> Action {
        guard let (input, output, quiescing) = reading, case .streamingBody(_, _, let last) = input else { return .none }
        // Graceful shutdown came while it streamed: it was let finish, and it is the last.
        if last || quiescing {
            state = .closing(output, final: nil, inputEnded: false)
            return .none
        }
        setReading(.waiting(since: now), output, quiescing: quiescing)
        return .resumeReading
    }

    /// The consumer of the streamed request body left before its end (the upstream answered
    /// early, or the chain dropped the request): the rest of the body is left unread, on the
    /// wire, so the answer is the connection's last (as nginx does).
    mutating func uploadCancelled() -> Action {
        guard let (input, output, _) = reading, case .streamingBody = input else { return .none }
        state = .closing(output, final: nil, inputEnded: false)
        return .none
    }

    /// The parser found the input is not a valid request (it reads no more).
    mutating func requestFailed(_ refusal: Refusal, now: NIODeadline) -> Action {
        switch state {
        case .open(.streamingBody, let output), .quiescing(.streamingBody, let output):
            // The request is with the chain already: its body is cut, and its answer is the last.
            state = .closing(output, final: nil, inputEnded: false)
            return .cutUpload
        case .open(_, let output), .quiescing(_, let output):
            state = .closing(output, final: refusal, inputEnded: false)
            return nextAnswer(now: now)
        case .initialized, .closing, .streaming, .closingOutput, .lingering, .closed:
            return .none
        }
    }

    /// After the bytes read were parsed: how far the next request has come, at `now`.
    mutating func inputProgressed(_ progress: Progress, now: NIODeadline) -> Action {
        guard let (input, output, quiescing) = reading else { return .none }
        // A streamed body's progress comes through its own events.
        if case .streamingBody = input { return .none }
        let next: Input
        var deadline: NIODeadline?
        switch (progress, input) {
        case (_, .paused):
            // Parsed what was kept before pausing: no deadline while Veneer holds the input.
            return .none
        case (.none, .waiting):
            // Nothing new since the last request (empty lines between requests, say): not
            // activity that keeps the connection open.
            return .none
        case (.none, _):
            next = .waiting(since: now)
        case (.head, .head):
            // The deadline stays where the head's first byte put it: trickling does not extend it.
            return .none
        case (.head, _):
            next = .head(started: now)
            deadline = now + limits.headerTimeout
        case (.body, .body):
            next = .body(lastRead: now)
        case (.body, _):
            next = .body(lastRead: now)
            deadline = now + limits.bodyTimeout
        }
        setReading(next, output, quiescing: quiescing)
        guard let deadline else { return .none }
        return armIfEarlier(deadline)
    }

    /// The request being read asked for `100 Continue`.
    func continueExpected() -> Action {
        // Only when it is next: an interim answer cannot go between another answer's parts.
        guard case .open(_, .idle) = state, queue.isEmpty else { return .none }
        return .sendContinue
    }

    /// The edge answered the request it was given. Whether the connection goes on after it was
    /// settled when the request was read (``requestParsed(_:keepAlive:bodyBytes:now:)``): a
    /// request whose body was not read whole is reported as not keeping it alive.
    mutating func answerReady(now: NIODeadline) -> AnswerAction {
        switch state {
        case .open(let input, .answering(let keepAlive, let writable)), .quiescing(let input, .answering(let keepAlive, let writable)):
            if !keepAlive || input.isStreamingBody {
                // An answer before the end of its streamed body (an upstream's early 413, say):
                // the rest of the body is left unread, so the connection ends with it.
                finishClosing(now: now, inputEnded: false)
                return .write(close: true)
            }
            setReading(input, writable ? .idle(since: now) : .blocked(since: now), quiescing: reading?.quiescing == true)
            return .write(close: false)
        case .closing(.answering(_, let writable), let final, let inputEnded):
            if queue.isEmpty && final == nil {
                finishClosing(now: now, inputEnded: inputEnded)
                return .write(close: true)
            }
            state = .closing(writable ? .idle(since: now) : .blocked(since: now), final: final, inputEnded: inputEnded)
            return .write(close: false)
        case .closingOutput, .lingering, .closed:
            // The connection ended while the chain was answering.
            return .discard
        case .initialized, .open, .quiescing, .closing, .streaming:
            preconditionFailure("an answer came for a request that was never handed out (\(state))")
        }
    }

    /// The chain answered the request being answered with a head whose body streams. The
    /// requests queued behind it wait until its body has been sent.
    mutating func bodyStreamReady(now: NIODeadline) -> BodyStreamAction {
        switch state {
        case .open(let input, .answering(let keepAlive, let writable)), .quiescing(let input, .answering(let keepAlive, let writable)):
            if !keepAlive || input.isStreamingBody {
                state = .closing(.sendingBody(keepAlive: false, blockedSince: writable ? nil : now), final: nil, inputEnded: false)
                return .start(close: true)
            }
            setReading(input, .sendingBody(keepAlive: true, blockedSince: writable ? nil : now), quiescing: reading?.quiescing == true)
            return .start(close: false)
        case .closing(.answering(_, let writable), let final, let inputEnded):
            let last = queue.isEmpty && final == nil
            state = .closing(.sendingBody(keepAlive: !last, blockedSince: writable ? nil : now), final: final, inputEnded: inputEnded)
            return .start(close: last)
        case .closingOutput, .lingering, .closed:
            return .discard
        case .initialized, .open, .quiescing, .closing, .streaming:
            preconditionFailure("an answer came for a request that was never handed out (\(state))")
        }
    }

    /// A part of the streamed body was handed to the channel: whether to ask for the next one
    /// now (else once the output drains, ``Action/readBody``).
    func bodyPartWritten() -> Bool {
        switch state {
        case .open(_, .sendingBody(_, let blockedSince)), .quiescing(_, .sendingBody(_, let blockedSince)),
             .closing(.sendingBody(_, let blockedSince), _, _):
            return blockedSince == nil
        case .initialized, .open, .quiescing, .closing, .streaming, .closingOutput, .lingering, .closed:
            return false
        }
    }

    /// The streamed body ended whole and was handed to the channel: the answer is complete.
    mutating func bodyEnded(now: NIODeadline) -> Action {
        switch state {
        case .open(let input, .sendingBody(_, let blockedSince)), .quiescing(let input, .sendingBody(_, let blockedSince)):
            setReading(input, blockedSince.map { .blocked(since: $0) } ?? .idle(since: now), quiescing: reading?.quiescing == true)
            return nextAnswer(now: now)
        case .closing(.sendingBody(let keepAlive, let blockedSince), let final, let inputEnded):
            if !keepAlive {
                finishClosing(now: now, inputEnded: inputEnded)
                return .end
            }
            state = .closing(blockedSince.map { .blocked(since: $0) } ?? .idle(since: now), final: final, inputEnded: inputEnded)
            return nextAnswer(now: now)
        case .initialized, .open, .quiescing, .closing, .streaming, .closingOutput, .lingering, .closed:
            return .none
        }
    }

    /// The streamed body was cut (the upstream failed or paused too long): its head is out,
    /// so the client can only learn it from the connection closing.
    mutating func bodyFailed() -> Action {
        if case .closed = state { return .none }
        state = .closed
        queue.removeAll()
        queuedBodyBytes = 0
        return .close
    }

    /// The edge answered the request being answered with a stream (``AdminStream``): it is
    /// the connection's last answer, and the requests behind it are dropped.
    mutating func streamReady(now: NIODeadline) -> StreamAction {
        let output: Output, inputEnded: Bool
        switch state {
        case .open(_, let answering), .quiescing(_, let answering):
            output = answering
            inputEnded = false
        case .closing(let answering, _, let ended):
            output = answering
            inputEnded = ended
        case .closingOutput, .lingering, .closed:
            return .discard
        case .initialized, .streaming:
            preconditionFailure("a stream came for a request that was never handed out (\(state))")
        }
        guard case .answering(_, let writable) = output else {
            preconditionFailure("a stream came for a request that was never handed out (\(state))")
        }
        if quiesced || inputEnded {
            finishClosing(now: now, inputEnded: inputEnded)
            return .headOnly
        }
        queue.removeAll()
        queuedBodyBytes = 0
        state = .streaming(blockedSince: writable ? nil : now)
        return .start
    }

    /// The stream being written has a chunk.
    func chunkReady() -> ChunkAction {
        guard case .streaming(let blockedSince) = state else { return .stop }
        return blockedSince == nil ? .write : .drop
    }

    /// The stream's chunks ended (or its iteration was stopped): the answer is complete.
    mutating func streamFinished(now: NIODeadline) -> Action {
        guard case .streaming = state else { return .none }
        state = .closingOutput(since: now, inputEnded: false)
        return .end
    }

    /// The answer was handed to the channel (which may have said, meanwhile, that it is no
    /// longer writable): what next.
    mutating func answerWritten(now: NIODeadline) -> Action {
        nextAnswer(now: now)
    }

    /// The channel's writability changed: unsent answers went over the output buffer
    /// (`false`) or below its low mark again (`true`).
    mutating func writabilityChanged(writable: Bool, now: NIODeadline) -> Action {
        func changed(_ output: Output) -> Output {
            switch (output, writable) {
            case (.idle, false): return .blocked(since: now)
            case (.blocked, true): return .idle(since: now)
            case (.answering(let keepAlive, _), _): return .answering(keepAlive: keepAlive, writable: writable)
            case (.sendingBody(let keepAlive, _), true): return .sendingBody(keepAlive: keepAlive, blockedSince: nil)
            case (.sendingBody(let keepAlive, let since), false): return .sendingBody(keepAlive: keepAlive, blockedSince: since ?? now)
            case (.idle, true), (.blocked, false): return output
            }
        }
        /// A body whose parts waited for the output: ask for the next one.
        func resumesBody(_ output: Output) -> Bool {
            if writable, case .sendingBody(_, _?) = output { return true }
            return false
        }
        switch state {
        case .open(let input, let output), .quiescing(let input, let output):
            let quiescing = reading?.quiescing == true
            if input.isStreamingBody {
                // The body streams whatever the answers' output does: its consumer paces it.
                setReading(input, changed(output), quiescing: quiescing)
                return .none
            }
            if !writable {
                setReading(.paused, changed(output), quiescing: quiescing)
                return input == .paused ? .none : .pauseReading
            }
            setReading(input, changed(output), quiescing: quiescing)
            if resumesBody(output) { return .readBody }
            return nextAnswer(now: now)
        case .closing(let output, let final, let inputEnded):
            state = .closing(changed(output), final: final, inputEnded: inputEnded)
            if resumesBody(output) { return .readBody }
            if case .sendingBody = output, !writable { return armIfEarlier(now + limits.idleTimeout) }
            return writable ? nextAnswer(now: now) : .none
        case .streaming(let blockedSince):
            if writable {
                state = .streaming(blockedSince: nil)
                return .none
            }
            guard blockedSince == nil else { return .none }
            state = .streaming(blockedSince: now)
            return armIfEarlier(now + limits.idleTimeout)
        case .initialized, .closingOutput, .lingering, .closed:
            return .none
        }
    }

    /// The timer fired at `now`.
    mutating func timerFired(now: NIODeadline) -> TimerAction {
        armedTimer = nil
        switch state {
        case .open(let input, let output), .quiescing(let input, let output):
            switch input {
            case .head(let started) where now >= started + limits.headerTimeout:
                return timedOut(output, now: now)
            case .body(let lastRead) where now >= lastRead + limits.bodyTimeout:
                return timedOut(output, now: now)
            case .streamingBody(let since, true, _) where now >= since + limits.bodyTimeout:
                // Its request is with the chain: cut its body; its answer ends the connection.
                state = .closing(output, final: nil, inputEnded: false)
                return .cutUpload(rearm: rearmDeadline(now + limits.idleTimeout))
            default:
                break
            }
            if let idleSince = idleSince(input, output), now >= idleSince + limits.idleTimeout {
                state = .closed
                return .close
            }
            if case .quiescing(.waiting, _) = state, let grace = firstRequestGrace, now >= grace {
                // Quiesced before its first request, which did not come.
                state = .closed
                return .close
            }
            let next = nextDeadline(input, output) ?? now + limits.idleTimeout
            if case .quiescing = state, let grace = firstRequestGrace, grace > now { return rearm(min(next, grace)) }
            return rearm(next)
        case .closing(let output, _, _):
            var blocked: NIODeadline?
            if case .blocked(let since) = output { blocked = since }
            if case .sendingBody(_, let since?) = output { blocked = since }
            if let since = blocked {
                if now >= since + limits.idleTimeout {
                    state = .closed
                    return .close
                }
                return rearm(since + limits.idleTimeout)
            }
            // Waiting for the chain, which has timeouts of its own.
            return rearm(now + limits.idleTimeout)
        case .streaming(let blockedSince):
            // A stream being written is not idle, however long it lasts; one its client does
            // not read is, as any answer left unread.
            guard let blockedSince else { return rearm(now + limits.idleTimeout) }
            if now >= blockedSince + limits.idleTimeout {
                state = .closed
                return .close
            }
            return rearm(blockedSince + limits.idleTimeout)
        case .closingOutput(let since, _):
            // The last answer has not gone out: the client has read nothing for that long.
            if now >= since + limits.idleTimeout {
                state = .closed
                return .close
            }
            return rearm(since + limits.idleTimeout)
        case .lingering(let until):
            if now >= until {
                state = .closed
                return .close
            }
            return rearm(until)
        case .initialized, .closed:
            return .none
        }
    }

    /// The client closed its side (it sends nothing more).
    mutating func inputClosed(now: NIODeadline) -> Action {
        switch state {
        case .open(.streamingBody, let output), .quiescing(.streamingBody, let output):
            // The client left mid-body: the body is cut (its upstream connection closes).
            state = .closing(output, final: nil, inputEnded: true)
            return .cutUpload
        case .open(_, let output), .quiescing(_, let output):
            // A request waiting with its body still to stream can never have it.
            if queue.last?.streams == true { queue.removeLast() }
            if case .idle = output, queue.isEmpty {
                // Nothing to answer; a request begun can never end.
                state = .closed
                return .close
            }
            state = .closing(output, final: nil, inputEnded: true)
            return .none
        case .closing(let output, let final, _):
            state = .closing(output, final: final, inputEnded: true)
            return .none
        case .streaming:
            // A client that closes its side has left (a browser closing the page): the stream
            // ends, and so does the connection.
            state = .closed
            return .close
        case .closingOutput(let since, _):
            state = .closingOutput(since: since, inputEnded: true)
            return .none
        case .lingering:
            // The client read the last answer and closed: lingering is over.
            state = .closed
            return .close
        case .initialized, .closed:
            return .none
        }
    }

    /// Graceful shutdown: finish what was read, then close.
    mutating func quiesce(now: NIODeadline) -> Action {
        quiesced = true
        switch state {
        case .initialized:
            state = .closed
            return .close
        case .open(let input, let output):
            if case .body = input {
                // A body on its way is read and answered: a client cannot safely send it again.
                state = .quiescing(input, output)
                return .none
            }
            if input.isStreamingBody || queue.last?.streams == true {
                // So is one that streams (or waits its turn to): its request is, or will be, with the chain.
                state = .quiescing(input, output)
                return .none
            }
            if !readAny, case .idle = output, queue.isEmpty {
                // Just accepted: its first request is read and answered, then it closes.
                state = .quiescing(input, output)
                firstRequestGrace = now + limits.headerTimeout
                return armIfEarlier(now + limits.headerTimeout)
            }
            if case .idle = output, queue.isEmpty {
                state = .closed
                return .close
            }
            // The requests read whole are answered; a head begun is dropped.
            state = .closing(output, final: nil, inputEnded: false)
            return nextAnswer(now: now)
        case .streaming(let blockedSince):
            // A stream never ends by itself: it ends now, so that shutdown does not wait for
            // it. Unread by its client, it is not worth waiting for at all.
            if blockedSince != nil {
                state = .closed
                return .close
            }
            state = .closingOutput(since: now, inputEnded: false)
            return .endStream
        case .quiescing, .closing, .closingOutput, .lingering, .closed:
            return .none
        }
    }

    /// Graceful shutdown's wait is over (`drain_timeout`): the connection ends now. A request
    /// the chain still holds is refused (its answer, if it comes, is dropped); the requests
    /// waiting behind it get nothing.
    mutating func drainEnded() -> CutAction {
        let unanswered = queue.map(\.request)
        queue.removeAll()
        queuedBodyBytes = 0
        let output: Output?
        switch state {
        case .open(_, let current), .quiescing(_, let current), .closing(let current, _, _):
            output = current
        case .initialized, .streaming, .closingOutput, .lingering:
            output = nil
        case .closed:
            return .none
        }
        state = .closed
        if case .answering? = output { return .refuse(unanswered: unanswered) }
        return .close(unanswered: unanswered)
    }

    /// The last answer was sent and the output shut, at `now`.
    mutating func outputShut(now: NIODeadline) -> Action {
        guard case .closingOutput(_, let inputEnded) = state else { return .none }
        if inputEnded {
            state = .closed
            return .close
        }
        let until = now + limits.lingerTime
        state = .lingering(until: until)
        armedTimer = until
        return .linger(until: until)
    }

    /// The socket failed (a reset, a failed write).
    mutating func errorCaught() -> Action {
        if case .closed = state { return .none }
        state = .closed
        queue.removeAll()
        return .close
    }

    /// The channel is gone.
    mutating func channelInactive() -> Action {
        state = .closed
        queue.removeAll()
        queuedBodyBytes = 0
        guard armedTimer != nil else { return .none }
        armedTimer = nil
        return .cancelTimer
    }

    // MARK: Helpers

    /// With the output free: the next queued request, the refusal that ends the connection,
    /// the end itself, reading again, or nothing.
    private mutating func nextAnswer(now: NIODeadline) -> Action {
        switch state {
        case .open(let input, .idle(let since)), .quiescing(let input, .idle(let since)):
            let quiescing = reading?.quiescing == true
            if let next = queue.popFirst() {
                queuedBodyBytes -= next.bodyBytes
                // A request whose body streams: its body is read now, as the chain asks for it.
                let reading = next.streams ? .streamingBody(since: max(since, now), wanted: false, last: !next.keepAlive || quiescing) : input
                setReading(reading, .answering(keepAlive: next.keepAlive, writable: true), quiescing: quiescing)
                return .answer(next.request)
            }
            guard input == .paused else { return .none }
            // Everything answered and sent: read again (what was kept is parsed first).
            setReading(.waiting(since: since), .idle(since: since), quiescing: quiescing)
            return .resumeReading
        case .closing(.idle(let since), let final, let inputEnded):
            // A request whose body streams cannot be read once the connection closes.
            if queue.last?.streams == true { queue.removeLast() }
            if let next = queue.popFirst() {
                queuedBodyBytes -= next.bodyBytes
                state = .closing(.answering(keepAlive: next.keepAlive, writable: true), final: final, inputEnded: inputEnded)
                return .answer(next.request)
            }
            state = .closingOutput(since: max(since, now), inputEnded: inputEnded)
            if let final { return .refuse(final) }
            return .end
        case .initialized, .open, .quiescing, .closing, .streaming, .closingOutput, .lingering, .closed:
            return .none
        }
    }

    /// The sides of a connection that still reads requests (open, or quiescing).
    private var reading: (input: Input, output: Output, quiescing: Bool)? {
        switch state {
        case .open(let input, let output): return (input, output, false)
        case .quiescing(let input, let output): return (input, output, true)
        case .initialized, .closing, .streaming, .closingOutput, .lingering, .closed: return nil
        }
    }

    private mutating func setReading(_ input: Input, _ output: Output, quiescing: Bool) {
        state = quiescing ? .quiescing(input, output) : .open(input, output)
    }

    /// After the last answer: nothing more is answered.
    private mutating func finishClosing(now: NIODeadline, inputEnded: Bool) {
        queue.removeAll()
        queuedBodyBytes = 0
        state = .closingOutput(since: now, inputEnded: inputEnded)
    }

    /// Since when a connection has had nothing to do (nil: it has something to do). A client
    /// that reads none of its answers counts as idle too.
    private func idleSince(_ input: Input, _ output: Output) -> NIODeadline? {
        switch (input, output) {
        case (_, .blocked(let since)), (_, .sendingBody(_, let since?)):
            return since
        case (.waiting(let read), .idle(let answered)) where queue.isEmpty:
            return max(read, answered)
        default:
            return nil
        }
    }

    /// The earliest deadline that applies now, if any.
    private func nextDeadline(_ input: Input, _ output: Output) -> NIODeadline? {
        let idle = idleSince(input, output).map { $0 + limits.idleTimeout }
        let reading: NIODeadline? = switch input {
        case .head(let started): started + limits.headerTimeout
        case .body(let lastRead): lastRead + limits.bodyTimeout
        case .streamingBody(let since, true, _): since + limits.bodyTimeout
        case .waiting, .paused, .streamingBody: nil
        }
        guard let reading else { return idle }
        guard let idle else { return reading }
        return min(reading, idle)
    }

    /// A head or body too slow: refused once the answers before it are out.
    private mutating func timedOut(_ output: Output, now: NIODeadline) -> TimerAction {
        state = .closing(output, final: .timedOut, inputEnded: false)
        switch nextAnswer(now: now) {
        case .refuse(let refusal):
            return .refuse(refusal, rearm: rearmDeadline(now + limits.idleTimeout))
        default:
            return rearm(now + limits.idleTimeout)
        }
    }

    private mutating func rearm(_ deadline: NIODeadline) -> TimerAction {
        .rearm(rearmDeadline(deadline))
    }

    private mutating func rearmDeadline(_ deadline: NIODeadline) -> NIODeadline {
        armedTimer = deadline
        return deadline
    }

    private mutating func arm(_ deadline: NIODeadline) -> Action {
        armedTimer = deadline
        return .armTimer(deadline)
    }

    /// Arms the timer only if it would fire after `deadline` (or is not set): a later timer
    /// finds nothing due and moves itself to what is.
    private mutating func armIfEarlier(_ deadline: NIODeadline) -> Action {
        if let armedTimer, armedTimer <= deadline { return .none }
        return arm(deadline)
    }
}

extension ServerConnectionStateMachine.Input {
    /// Whether a request's body streams to the chain now.
    var isStreamingBody: Bool {
        if case .streamingBody = self { return true }
        return false
    }
}

extension ServerConnectionStateMachine.Output {
    /// Whether a request is being answered (its answer awaited, or its body being sent).
    var isAnswering: Bool {
        switch self {
        case .answering, .sendingBody: return true
        case .idle, .blocked: return false
        }
    }
}

extension ServerConnectionStateMachine.Action: Equatable where Request: Equatable {}

extension ServerConnectionStateMachine.CutAction: Equatable where Request: Equatable {}
