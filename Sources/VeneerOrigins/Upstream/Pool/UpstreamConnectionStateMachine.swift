import HTTPTypes
import NIOCore
import VeneerCore
import VeneerHTTP1

/// One keep-alive connection to an upstream, as a value: which part of an exchange it is in,
/// and the parser of the response arriving. ``UpstreamConnectionHandler`` feeds it the
/// channel's events and performs the ``Action`` each returns; it has no channel and no clock.
///
/// One request at a time (no pipelining). What the pool decides (which request, retries,
/// deadlines) is ``UpstreamPoolStateMachine``'s, and what belongs to the request (its body
/// being sent, its streamed answer being read, whether an early answer leaves the connection
/// reusable) is ``UpstreamExchangeStateMachine``'s; this machine only says what the wire did.
struct UpstreamConnectionStateMachine {
    enum State: Equatable {
        /// The TCP connection is being made.
        case connecting
        /// Open, carrying no request: any byte from the peer now is out of turn.
        case idle
        /// A request was written and not a byte of its response has come back yet: a close
        /// now means the upstream never saw or never answered it (the pool may retry).
        case awaitingResponse(HTTPRequest.Method)
        /// Part of the response has arrived.
        case receivingResponse(HTTPRequest.Method)
        /// The head of a streamed response was delivered and its body passes part by part,
        /// read only while its consumer asks for parts (``BodyStream``).
        case streamingBody
        /// Veneer is closing it (given up, not reusable, or the peer misbehaved): what still
        /// arrives is dropped and nothing more is reported.
        case closing
        /// The channel is gone.
        case closed
    }

    /// What the handler does, in this order: close the channel where the action says so, then
    /// report to the pool.
    enum Action {
        /// Nothing.
        case none
        /// Serialize the request and send it.
        case write
        /// The connection was gone before the request went out: report it unsent.
        case notSent
        /// A whole response: report it; unless `keepAlive`, the connection is closed first.
        case deliver(ProxyResponse, keepAlive: Bool)
        /// The exchange failed: close, then report.
        case fail(UpstreamFailure)
        /// The connection ended before a byte of the response: close, then report (a request
        /// on a reused connection may be retried, if its exchange allows it).
        case closedBeforeResponse
        /// Close; there is nothing to report.
        case close
        /// The head of a response whose body streams: report it with a ``BodyStream`` fed by
        /// this connection; then ask for the next event (``parseNext()``).
        case streamHead(ProxyResponse, expectedLength: Int?)
        /// The next part of the streamed body: hand it to the stream; then ``parseNext()``.
        case streamPart(ByteBuffer)
        /// The streamed body ended: end the stream and report the connection free (closed
        /// first unless `keepAlive`).
        case streamEnd(keepAlive: Bool)
        /// The streamed body was cut: close, then fail the stream (its head is out already).
        case streamFailed(UpstreamFailure)
    }

    private(set) var state = State.connecting
    /// Kept beside the state (not in it) so that appending to its buffer never copies.
    private var parser = HTTP1ResponseParser(maxBodySize: 0)

    /// The TCP connection is up.
    mutating func connected() {
        if case .connecting = state { state = .idle }
    }

    /// The pool runs a request on this connection. `channelIsActive` is whether the channel
    /// is still open (it may have closed since it went idle, before its close was reported).
    /// `streamThreshold`: bodies of unknown length or longer than that stream (nil: every
    /// body is read whole, up to `maxResponseBodySize`). `budget`: an answer under the
    /// threshold reserves its length there, else streams.
    mutating func startRequest(_ method: HTTPRequest.Method, maxResponseBodySize: Int, streamThreshold: Int? = nil,
                               budget: BufferBudget? = nil, channelIsActive: Bool) -> Action {
        switch state {
        case .idle:
            guard channelIsActive else {
                state = .closing
                return .notSent
            }
            parser.reset()
            parser.maxBodySize = maxResponseBodySize
            parser.streamThreshold = streamThreshold
            parser.budget = budget
            state = .awaitingResponse(method)
            return .write
        case .connecting, .closing, .closed:
            return .notSent
        case .awaitingResponse, .receivingResponse, .streamingBody:
            preconditionFailure("The pool runs one request at a time on an upstream connection (state \(state)).")
        }
    }

    /// Bytes arrived. After ``Action/streamHead(_:expectedLength:)`` and
    /// ``Action/streamPart(_:)``, ask ``parseNext()`` for what else they hold.
    mutating func read(_ bytes: ByteBuffer) -> Action {
        switch state {
        case .awaitingResponse, .receivingResponse, .streamingBody:
            break
        case .connecting, .idle:
            // Nothing was asked: a peer that talks out of turn cannot be trusted with the next request.
            state = .closing
            return .close
        case .closing, .closed:
            return .none
        }
        parser.append(bytes)
        return parseNext()
    }

    /// What the bytes read so far hold next.
    mutating func parseNext() -> Action {
        let method: HTTPRequest.Method
        switch state {
        case .awaitingResponse(let asked), .receivingResponse(let asked):
            method = asked
        case .streamingBody:
            // A streamed body's framing no longer depends on the method.
            method = .get
        case .connecting, .idle, .closing, .closed:
            return .none
        }
        do {
            switch try parser.nextEvent(requestMethod: method) {
            case nil:
                if case .awaitingResponse = state { state = .receivingResponse(method) }
                return .none
            case .response(let parsed):
                // Bytes beyond the answer were not asked for: do not reuse the connection.
                let keepAlive = parsed.keepAlive && !parser.hasUnreadBytes
                parser.reset()
                state = keepAlive ? .idle : .closing
                return .deliver(parsed.response, keepAlive: keepAlive)
            case .head(let head, let expectedLength):
                state = .streamingBody
                return .streamHead(head, expectedLength: expectedLength)
            case .part(let part):
                return .streamPart(part)
            case .end(let keepAlive):
                let reusable = keepAlive && !parser.hasUnreadBytes
                parser.reset()
                state = reusable ? .idle : .closing
                return .streamEnd(keepAlive: reusable)
            }
        } catch {
            parser.reset()
            if case .streamingBody = state {
                state = .closing
                return .streamFailed(.malformed(error.reason))
            }
            state = .closing
            return .fail(error.kind == .bodyTooLarge ? .tooLarge(error.reason) : .malformed(error.reason))
        }
    }

    /// The exchange on this connection is given up for `failure` (its streamed request body
    /// was cut: the upstream has part of a request): the connection closes, never pooled, and
    /// the exchange fails (the stream of an answer already under way is cut).
    mutating func abandon(_ failure: UpstreamFailure) -> Action {
        switch state {
        case .awaitingResponse, .receivingResponse:
            parser.reset()
            state = .closing
            return .fail(failure)
        case .streamingBody:
            parser.reset()
            state = .closing
            return .streamFailed(failure)
        case .connecting, .idle, .closing, .closed:
            return .none
        }
    }

    /// The streamed body's consumer left: the rest is not read, and the connection, with the
    /// rest of that body on it, is never reused.
    mutating func bodyCancelled() -> Action {
        guard case .streamingBody = state else { return .none }
        parser.reset()
        state = .closing
        return .close
    }

    /// The upstream sent nothing of a streamed body for longer than the longest pause allowed
    /// (`limits.body_timeout`) while a part was wanted.
    mutating func bodyPauseTimedOut() -> Action {
        guard case .streamingBody = state else { return .none }
        parser.reset()
        state = .closing
        return .streamFailed(.timedOut)
    }

    /// The peer closed its side of the connection (a body that runs until the close is
    /// complete once the channel is inactive).
    mutating func inputClosed() -> Action {
        if case .closed = state { return .none }
        return .close
    }

    /// The channel closed (either side).
    mutating func channelInactive() -> Action {
        let before = state
        state = .closed
        switch before {
        case .awaitingResponse:
            return .closedBeforeResponse
        case .receivingResponse:
            defer { parser.reset() }
            do {
                guard let parsed = try parser.endOfInput() else { return .closedBeforeResponse }
                return .deliver(parsed.response, keepAlive: false)
            } catch {
                return .fail(.closedMidResponse)
            }
        case .streamingBody:
            defer { parser.reset() }
            // A close-delimited body ends here; any other was cut short.
            guard case .end = try? parser.endOfStream() else { return .streamFailed(.closedMidResponse) }
            return .streamEnd(keepAlive: false)
        case .connecting, .idle, .closing, .closed:
            return .none
        }
    }

    /// The channel reported an error (a reset, a failed write); the handler closes it.
    mutating func errorCaught() -> Action {
        switch state {
        case .awaitingResponse:
            state = .closing
            return .closedBeforeResponse
        case .receivingResponse:
            parser.reset()
            state = .closing
            return .fail(.failedMidResponse)
        case .streamingBody:
            parser.reset()
            state = .closing
            return .streamFailed(.failedMidResponse)
        case .connecting, .idle, .closing:
            state = .closing
            return .close
        case .closed:
            return .none
        }
    }

    /// The pool gives up on this connection (its request timed out or was cancelled, it idled
    /// too long, or the transport shuts down): whatever was under way is forgotten.
    mutating func close() -> Action {
        switch state {
        case .closed, .closing:
            return .none
        case .connecting, .idle, .awaitingResponse, .receivingResponse:
            parser.reset()
            state = .closing
            return .close
        case .streamingBody:
            // The body's consumer hears that it was cut.
            parser.reset()
            state = .closing
            return .streamFailed(.shuttingDown)
        }
    }
}
