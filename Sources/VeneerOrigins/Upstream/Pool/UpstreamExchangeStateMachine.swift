/// One request's life seen from its caller, as a value: made (possibly on another thread),
/// handed to its pool's event loop, answered; with a body that streams either way, the
/// request body being sent part by part and the answer's body being read part by part (the
/// shape of AsyncHTTPClient's `HTTPRequestStateMachine`: a request state and a response
/// state side by side). Where it is inside the pool (queued, on a connection being opened,
/// running on one) is ``UpstreamPoolStateMachine``'s to know, and what the wire did is
/// ``UpstreamConnectionStateMachine``'s; this machine holds what belongs to the request.
///
/// The waiter (a task's continuation, or a callback) lives only in ``State/submitted(_:_:)``:
/// ``finish(streamed:)`` hands it out once, so a caller cannot be resumed twice, whatever
/// arrives late (a timeout, a cancel, a close).
struct UpstreamExchangeStateMachine<Waiter> {
    enum State {
        /// Made, not yet on the pool's loop.
        case created
        /// The caller's task was cancelled before the request reached the loop.
        case cancelled
        /// In the pool; `Waiter` waits for the outcome.
        case submitted(Waiter, RequestBody)
        /// The answer's head went to the waiter; its body streams.
        case streaming(RequestBody, AnswerBody)
        /// Done with: answered whole, its streamed body ended or cut, or failed.
        case finished
    }

    /// How the request's body goes out.
    enum RequestBody: Equatable {
        /// Whole, written with the head (or none).
        case whole
        /// Streamed after the head, part by part as written parts leave the channel.
        case sending
        /// Streamed and sent to its end.
        case sent
        /// Streamed and cut before its end (its client left or paused too long): nothing more goes.
        case cut
    }

    /// A streamed answer's body, from its head on (whether a part is wanted now is its
    /// ``BodyStream``'s to know: it holds what was read ahead).
    enum AnswerBody: Equatable {
        /// Its head is out and nobody reads it yet (the head's deadline runs).
        case unread
        /// Its consumer reads it.
        case reading
    }

    /// What to do once the request is on the loop.
    enum StartAction {
        /// Give it to the pool.
        case submit
        /// It was cancelled on the way: fail `Waiter` at once.
        case failCancelled(Waiter)
    }

    /// What a cancel asks for.
    enum CancelAction: Equatable {
        /// Nothing (not on the loop yet, answered already, or finished).
        case none
        /// Take it out of the pool.
        case cancelInPool
    }

    /// What a request body cut before its end (its client left or paused too long) asks for.
    enum RequestBodyCutAction: Equatable {
        /// Nothing: it was not streaming, or the exchange is over.
        case none
        /// No answer yet: close the connection (the upstream has part of a request) and fail the exchange.
        case failExchange
        /// Its answer streams already: close the connection and cut the answer's stream.
        case cutAnswer
    }

    private(set) var state = State.created

    /// The request reaches its pool's loop, with who waits for it; `streamsBody`: its body
    /// follows its head part by part.
    mutating func start(_ waiter: Waiter, streamsBody: Bool = false) -> StartAction {
        switch state {
        case .created:
            state = .submitted(waiter, streamsBody ? .sending : .whole)
            return .submit
        case .cancelled:
            state = .finished
            return .failCancelled(waiter)
        case .submitted, .streaming, .finished:
            preconditionFailure("An upstream request is started once.")
        }
    }

    /// The caller's task was cancelled.
    mutating func cancel() -> CancelAction {
        switch state {
        case .created:
            state = .cancelled
            return .none
        case .submitted:
            return .cancelInPool
        case .cancelled, .streaming, .finished:
            // Once the head is out the caller holds the stream: it leaves by cancelling that.
            return .none
        }
    }

    /// The outcome is known: the waiter to give it to, the first time only. `streamed`: the
    /// outcome is the head of an answer whose body follows (``answerPartWanted()`` and the rest).
    mutating func finish(streamed: Bool = false) -> Waiter? {
        guard case .submitted(let waiter, let body) = state else { return nil }
        state = streamed ? .streaming(body, .unread) : .finished
        return waiter
    }

    // MARK: The request body

    /// The request body being sent, if any (nil once the exchange is over).
    var requestBody: RequestBody? {
        switch state {
        case .submitted(_, let body), .streaming(let body, _): body
        case .created, .cancelled, .finished: nil
        }
    }

    /// A part of the streamed request body left the channel: whether to send the next one
    /// (no longer once the exchange is over: answered early, cut, or its connection gone).
    func requestBodyPartSent() -> Bool {
        requestBody == .sending
    }

    /// The streamed request body was sent to its end: whether the wait for the answer's head
    /// (`timeout`) starts now (not when the head is out already, nor once the exchange is over).
    mutating func requestBodyEnded() -> Bool {
        switch state {
        case .submitted(let waiter, .sending):
            state = .submitted(waiter, .sent)
            return true
        case .streaming(.sending, let answer):
            state = .streaming(.sent, answer)
            return false
        default:
            return false
        }
    }

    /// A part of the streamed request body was written: whether a deadline for the upstream to
    /// take it (`body_timeout`, nginx's `proxy_send_timeout`) applies, that is while the body is
    /// still being sent.
    func requestBodyPartWritten() -> Bool {
        requestBody == .sending
    }

    /// The upstream took nothing of the streamed request body for `body_timeout` while a part
    /// waited to leave (it stopped reading): as a cut, the upstream has part of a request.
    mutating func requestBodySendTimedOut() -> RequestBodyCutAction {
        requestBodyCut()
    }

    /// The streamed request body was cut before its end: the upstream has part of a request.
    mutating func requestBodyCut() -> RequestBodyCutAction {
        switch state {
        case .submitted(let waiter, .sending):
            // The waiter is told by the pool, with the failure the connection reports.
            state = .submitted(waiter, .cut)
            return .failExchange
        case .streaming(.sending, _):
            state = .finished
            return .cutAnswer
        default:
            return .none
        }
    }

    /// Whether a connection closed before a byte of the answer may send the request again:
    /// not once a streamed request body was taken from its stream (it cannot be sent twice).
    var mayRetryBeforeAnswer: Bool {
        requestBody == .whole
    }

    /// The whole answer (or a streamed answer's end) arrived; `keepAlive` is what the wire
    /// allows. Whether the connection may carry another request: not while the request body
    /// is still being sent (an early answer, a 413 say: the rest is not sent, and the upstream
    /// is owed bytes the connection will never carry).
    mutating func answerComplete(keepAlive: Bool) -> Bool {
        let reusable = keepAlive && requestBody != .sending
        if case .streaming = state { state = .finished }
        return reusable
    }

    // MARK: A streamed answer's body

    /// Its consumer started reading: the deadline for that (armed with the head) is over.
    mutating func answerBodyStarted() {
        if case .streaming(let body, .unread) = state { state = .streaming(body, .reading) }
    }

    /// Its consumer wants a part: whether the socket may be read for it (the body streams and
    /// is being read).
    func answerPartWanted() -> Bool {
        if case .streaming(_, .reading) = state { return true }
        return false
    }

    /// A part arrived: whether it ends a pause (its consumer was reading; before that, the
    /// head's deadline for a consumer runs on).
    func answerPartArrived() -> Bool {
        answerPartWanted()
    }

    /// Its consumer left mid-body: whether to close the connection (with the rest of the body
    /// on it, it is never returned to the pool).
    mutating func clientLeft() -> Bool {
        guard case .streaming = state else { return false }
        state = .finished
        return true
    }

    /// The upstream failed, closed or paused too long mid-body: whether there is a stream to
    /// cut (its head is out, so its client's connection closes).
    mutating func upstreamFailedMidBody() -> Bool {
        guard case .streaming = state else { return false }
        state = .finished
        return true
    }
}
