import NIOCore
import Testing
@testable import VeneerServer

/// The server connection's state machine alone, event by event, with requests as strings and
/// times as arguments: pipelining, the limits, the timeouts, quiescing, the ways a connection
/// ends, and the events that must change nothing where they cannot apply.
@Suite("Server connection state machine")
struct ServerConnectionStateMachineTests {
    typealias Machine = ServerConnectionStateMachine<String>

    static let limits = Machine.Limits(
        headerTimeout: .seconds(10), bodyTimeout: .seconds(30), idleTimeout: .seconds(75), pipelineDepth: 3, queuedBodyBytes: 100,
        lingerTime: .seconds(2))

    /// `seconds` after an arbitrary start.
    static func at(_ seconds: Double) -> NIODeadline {
        .uptimeNanoseconds(1_000_000_000_000 + UInt64(seconds * 1e9))
    }

    /// An active machine, at time 0.
    static func active(_ limits: Machine.Limits = limits) -> Machine {
        var machine = Machine(limits: limits)
        _ = machine.channelActive(now: at(0))
        return machine
    }

    /// An active machine answering "a" (handed out at time 0).
    static func answering(keepAlive: Bool = true) -> Machine {
        var machine = active()
        _ = machine.requestParsed("a", keepAlive: keepAlive, bodyBytes: 0, now: Self.at(0))
        return machine
    }

    // MARK: Requests and answers

    @Test("activation sets the idle timer once; a second activation changes nothing")
    func activation() {
        var machine = Machine(limits: Self.limits)
        #expect(machine.channelActive(now: Self.at(0)) == .armTimer(Self.at(75)))
        #expect(machine.state == .open(.waiting(since: Self.at(0)), .idle(since: Self.at(0))))
        #expect(machine.channelActive(now: Self.at(1)) == .none)
        #expect(machine.armedTimer == Self.at(75))
    }

    @Test("a request is answered at once; its answer written, the connection waits for the next")
    func oneRequest() {
        var machine = Self.active()
        #expect(machine.bytesRead() == .parse)
        #expect(machine.requestParsed("a", keepAlive: true, bodyBytes: 0, now: Self.at(0)) == .answer(pauseReading: false))
        #expect(machine.state == .open(.waiting(since: Self.at(0)), .answering(keepAlive: true, writable: true)))
        #expect(machine.answerReady(now: Self.at(1)) == .write(close: false))
        #expect(machine.answerWritten(now: Self.at(1)) == .none)
        #expect(machine.state == .open(.waiting(since: Self.at(0)), .idle(since: Self.at(1))))
    }

    @Test("pipelined requests wait in order and are handed out one at a time as answers are written")
    func pipelining() {
        var machine = Self.answering()
        #expect(machine.requestParsed("b", keepAlive: true, bodyBytes: 0, now: Self.at(0)) == .wait(pauseReading: false))
        #expect(machine.queuedRequests == 1)
        #expect(machine.answerReady(now: Self.at(1)) == .write(close: false))
        #expect(machine.answerWritten(now: Self.at(1)) == .answer("b"))
        #expect(machine.answerReady(now: Self.at(2)) == .write(close: false))
        #expect(machine.answerWritten(now: Self.at(2)) == .none)
    }

    @Test("at pipeline_depth requests the socket is not read; it is read again once all are answered")
    func pipelineDepth() {
        var machine = Self.answering()
        #expect(machine.requestParsed("b", keepAlive: true, bodyBytes: 0, now: Self.at(0)) == .wait(pauseReading: false))
        #expect(machine.requestParsed("c", keepAlive: true, bodyBytes: 0, now: Self.at(0)) == .wait(pauseReading: true))
        #expect(!machine.readsRequests)
        #expect(machine.bytesRead() == .keep, "what arrives is kept for later, not parsed")
        for (next, time) in [("b", 1.0), ("c", 2.0)] {
            _ = machine.answerReady(now: Self.at(time))
            #expect(machine.answerWritten(now: Self.at(time)) == .answer(next))
        }
        _ = machine.answerReady(now: Self.at(3))
        #expect(machine.answerWritten(now: Self.at(3)) == .resumeReading)
        #expect(machine.readsRequests)
    }

    @Test("a depth of one pauses reading with every request it answers")
    func depthOne() {
        var limits = Self.limits
        limits.pipelineDepth = 1
        var machine = Self.active(limits)
        #expect(machine.requestParsed("a", keepAlive: true, bodyBytes: 0, now: Self.at(0)) == .answer(pauseReading: true))
        _ = machine.answerReady(now: Self.at(1))
        #expect(machine.answerWritten(now: Self.at(1)) == .resumeReading)
    }

    @Test("bodies waiting in the queue are bounded too")
    func queuedBodyBytes() {
        var machine = Self.answering()
        #expect(machine.requestParsed("b", keepAlive: true, bodyBytes: 100, now: Self.at(0)) == .wait(pauseReading: true))
    }

    @Test("Connection: close ends the connection with that request's answer; nothing after it is read")
    func closeRequested() {
        var machine = Self.active()
        #expect(machine.requestParsed("a", keepAlive: false, bodyBytes: 0, now: Self.at(0)) == .answer(pauseReading: false))
        #expect(!machine.readsRequests)
        #expect(machine.bytesRead() == .discard)
        #expect(machine.requestParsed("b", keepAlive: true, bodyBytes: 0, now: Self.at(0)) == .drop)
        #expect(machine.answerReady(now: Self.at(1)) == .write(close: true))
        #expect(machine.answerWritten(now: Self.at(1)) == .none)
        #expect(machine.outputShut(now: Self.at(2)) == .linger(until: Self.at(4)))
        #expect(machine.bytesRead() == .discard)
        #expect(machine.inputClosed(now: Self.at(3)) == .close, "the client read the answer and closed: lingering is over")
        #expect(machine.state == .closed)
    }

    @Test("a request with Connection: close behind others is answered after them, last")
    func closeRequestedBehindOthers() {
        var machine = Self.answering()
        #expect(machine.requestParsed("b", keepAlive: false, bodyBytes: 0, now: Self.at(0)) == .wait(pauseReading: false))
        #expect(machine.answerReady(now: Self.at(1)) == .write(close: false))
        #expect(machine.answerWritten(now: Self.at(1)) == .answer("b"))
        #expect(machine.answerReady(now: Self.at(2)) == .write(close: true))
    }

    @Test("a request whose body was left unread (reported as not keeping the connection alive) is its last, whatever answers it")
    func bodyLeftUnread() {
        var machine = Self.answering()
        #expect(machine.requestParsed("too large", keepAlive: false, bodyBytes: 0, now: Self.at(0)) == .wait(pauseReading: false))
        #expect(machine.bytesRead() == .discard, "the rest of its body is never read")
        #expect(machine.answerReady(now: Self.at(1)) == .write(close: false))
        #expect(machine.answerWritten(now: Self.at(1)) == .answer("too large"))
        #expect(machine.answerReady(now: Self.at(2)) == .write(close: true))
        #expect(machine.answerWritten(now: Self.at(2)) == .none)
        #expect(machine.state == .closingOutput(since: Self.at(2), inputEnded: false))
    }

    @Test("100 Continue only when the request is next in line")
    func expectContinue() {
        let idle = Self.active()
        #expect(idle.continueExpected() == .sendContinue)
        let busy = Self.answering()
        #expect(busy.continueExpected() == .none)
    }

    // MARK: Refusals and timeouts

    @Test("a malformed request is refused at once, or after the answers before it; nothing more is read")
    func malformed() {
        var idle = Self.active()
        #expect(idle.requestFailed(.malformed("bare LF"), now: Self.at(1)) == .refuse(.malformed("bare LF")))
        #expect(idle.state == .closingOutput(since: Self.at(1), inputEnded: false))
        #expect(idle.bytesRead() == .discard)

        var busy = Self.answering()
        #expect(busy.requestFailed(.malformed("bare LF"), now: Self.at(1)) == .none)
        #expect(busy.answerReady(now: Self.at(2)) == .write(close: false))
        #expect(busy.answerWritten(now: Self.at(2)) == .refuse(.malformed("bare LF")))
    }

    @Test("a head must arrive whole within header_timeout of its first byte; trickling does not extend it")
    func headerTimeout() {
        var machine = Self.active()
        #expect(machine.inputProgressed(.head, now: Self.at(1)) == .armTimer(Self.at(11)))
        #expect(machine.inputProgressed(.head, now: Self.at(5)) == .none)
        #expect(machine.inputProgressed(.head, now: Self.at(9)) == .none)
        #expect(machine.timerFired(now: Self.at(11)) == .refuse(.timedOut, rearm: Self.at(86)))
        #expect(machine.state == .closingOutput(since: Self.at(11), inputEnded: false))
    }

    @Test("a head that completes in time starts no refusal: the timer finds nothing due and moves on")
    func headInTime() {
        var machine = Self.active()
        _ = machine.inputProgressed(.head, now: Self.at(1))
        #expect(machine.requestParsed("a", keepAlive: true, bodyBytes: 0, now: Self.at(2)) == .answer(pauseReading: false))
        _ = machine.answerReady(now: Self.at(2))
        _ = machine.answerWritten(now: Self.at(2))
        #expect(machine.inputProgressed(.none, now: Self.at(2)) == .none)
        #expect(machine.timerFired(now: Self.at(11)) == .rearm(Self.at(77)))
    }

    @Test("a head that begins in the read that ends the one before has a deadline of its own")
    func nextHeadDeadline() {
        var machine = Self.active()
        _ = machine.inputProgressed(.head, now: Self.at(1))
        #expect(machine.requestParsed("a", keepAlive: true, bodyBytes: 0, now: Self.at(9)) == .answer(pauseReading: false))
        #expect(machine.inputProgressed(.head, now: Self.at(9)) == .none, "the timer set for 11 s fires first anyway")
        #expect(machine.state == .open(.head(started: Self.at(9)), .answering(keepAlive: true, writable: true)))
        #expect(machine.timerFired(now: Self.at(11)) == .rearm(Self.at(19)))
    }

    @Test("a slow head behind an answer in progress is refused after that answer")
    func headerTimeoutBehindAnswer() {
        var machine = Self.answering()
        _ = machine.inputProgressed(.head, now: Self.at(1))
        #expect(machine.timerFired(now: Self.at(11)) == .rearm(Self.at(86)))
        #expect(machine.answerReady(now: Self.at(12)) == .write(close: false))
        #expect(machine.answerWritten(now: Self.at(12)) == .refuse(.timedOut))
    }

    @Test("a body may pause at most body_timeout between reads")
    func bodyTimeout() {
        var machine = Self.active()
        #expect(machine.inputProgressed(.body, now: Self.at(1)) == .armTimer(Self.at(31)))
        #expect(machine.inputProgressed(.body, now: Self.at(20)) == .none)
        #expect(machine.timerFired(now: Self.at(31)) == .rearm(Self.at(50)))
        #expect(machine.timerFired(now: Self.at(50)) == .refuse(.timedOut, rearm: Self.at(125)))
    }

    @Test("a connection with nothing begun is closed silently at idle_timeout; empty lines do not keep it open")
    func idleTimeout() {
        var machine = Self.active()
        #expect(machine.inputProgressed(.none, now: Self.at(70)) == .none)
        #expect(machine.timerFired(now: Self.at(75)) == .close)
        #expect(machine.state == .closed)
    }

    @Test("the idle clock starts again with each answer; it does not run while the chain answers")
    func idleAfterAnswers() {
        var machine = Self.answering()
        #expect(machine.timerFired(now: Self.at(75)) == .rearm(Self.at(150)), "waiting for the chain is not idleness")
        _ = machine.answerReady(now: Self.at(100))
        _ = machine.answerWritten(now: Self.at(100))
        #expect(machine.timerFired(now: Self.at(150)) == .rearm(Self.at(175)))
        #expect(machine.timerFired(now: Self.at(175)) == .close)
    }

    // MARK: Output backpressure

    @Test("unsent answers over the output buffer stop reading and answering until they drain")
    func outputBlocked() {
        var machine = Self.answering()
        _ = machine.requestParsed("b", keepAlive: true, bodyBytes: 0, now: Self.at(0))
        #expect(machine.answerReady(now: Self.at(1)) == .write(close: false))
        // The write made the channel unwritable (NIO says so inside the write).
        #expect(machine.writabilityChanged(writable: false, now: Self.at(1)) == .pauseReading)
        #expect(machine.answerWritten(now: Self.at(1)) == .none, "b waits: its answer would only add to the pile")
        #expect(!machine.readsRequests)
        #expect(machine.writabilityChanged(writable: false, now: Self.at(2)) == .none)
        #expect(machine.writabilityChanged(writable: true, now: Self.at(3)) == .answer("b"))
        _ = machine.answerReady(now: Self.at(4))
        #expect(machine.answerWritten(now: Self.at(4)) == .resumeReading)
    }

    @Test("a client that reads none of its answers for idle_timeout is closed")
    func clientNeverReads() {
        var machine = Self.answering()
        _ = machine.answerReady(now: Self.at(1))
        #expect(machine.writabilityChanged(writable: false, now: Self.at(1)) == .pauseReading)
        #expect(machine.timerFired(now: Self.at(75)) == .rearm(Self.at(76)))
        #expect(machine.timerFired(now: Self.at(76)) == .close)
    }

    @Test("no head or body deadline runs while Veneer is the one not reading")
    func noInputDeadlineWhilePaused() {
        var machine = Self.active()
        _ = machine.inputProgressed(.head, now: Self.at(1))
        _ = machine.requestParsed("a", keepAlive: true, bodyBytes: 0, now: Self.at(2))
        #expect(machine.writabilityChanged(writable: false, now: Self.at(2)) == .pauseReading)
        #expect(machine.inputProgressed(.head, now: Self.at(2)) == .none)
        #expect(machine.timerFired(now: Self.at(11)) == .rearm(Self.at(86)))
    }

    @Test("an answer that finds the output blocked waits for it to drain before the next is handed out")
    func blockedWhileAnswering() {
        var machine = Self.answering()
        _ = machine.requestParsed("b", keepAlive: true, bodyBytes: 0, now: Self.at(0))
        #expect(machine.writabilityChanged(writable: false, now: Self.at(1)) == .pauseReading)
        #expect(machine.answerReady(now: Self.at(2)) == .write(close: false))
        #expect(machine.answerWritten(now: Self.at(2)) == .none)
        #expect(machine.state == .open(.paused, .blocked(since: Self.at(2))))
    }

    // MARK: Quiescing and the end of input

    @Test("graceful shutdown closes an idle connection at once, a second one changes nothing")
    func quiesceIdle() {
        var machine = Self.answering()
        // After an answer: an idle keep-alive connection (one never read is given its first request).
        _ = machine.answerReady(now: Self.at(0))
        _ = machine.answerWritten(now: Self.at(0))
        #expect(machine.quiesce(now: Self.at(1)) == .close)
        #expect(machine.quiesce(now: Self.at(2)) == .none)
    }

    @Test("graceful shutdown answers what was read, the last answer with Connection: close")
    func quiesceBusy() {
        var machine = Self.answering()
        _ = machine.requestParsed("b", keepAlive: true, bodyBytes: 0, now: Self.at(0))
        #expect(machine.quiesce(now: Self.at(1)) == .none)
        #expect(!machine.readsRequests)
        #expect(machine.quiesce(now: Self.at(1)) == .none, "a second quiesce changes nothing")
        #expect(machine.answerReady(now: Self.at(2)) == .write(close: false))
        #expect(machine.answerWritten(now: Self.at(2)) == .answer("b"))
        #expect(machine.answerReady(now: Self.at(3)) == .write(close: true))
    }

    @Test("graceful shutdown while a body arrives reads it and answers it, then closes")
    func quiesceMidBody() {
        var machine = Self.active()
        _ = machine.inputProgressed(.body, now: Self.at(1))
        #expect(machine.quiesce(now: Self.at(2)) == .none)
        #expect(machine.readsRequests)
        #expect(machine.requestParsed("a", keepAlive: true, bodyBytes: 10, now: Self.at(0)) == .answer(pauseReading: false))
        #expect(machine.answerReady(now: Self.at(3)) == .write(close: true))
    }

    @Test("graceful shutdown drops a head begun when nothing else is in progress")
    func quiesceMidHead() {
        var machine = Self.answering()
        _ = machine.answerReady(now: Self.at(0))
        _ = machine.answerWritten(now: Self.at(0))
        _ = machine.inputProgressed(.head, now: Self.at(1))
        #expect(machine.quiesce(now: Self.at(2)) == .close)
    }

    @Test("drain_timeout's end: the request being answered is refused (its late answer dropped), the ones behind it go unanswered; once closed nothing happens")
    func drainEnded() {
        var busy = Self.answering()
        _ = busy.requestParsed("b", keepAlive: true, bodyBytes: 4, now: Self.at(0))
        _ = busy.quiesce(now: Self.at(1))
        #expect(busy.drainEnded() == .refuse(unanswered: ["b"]))
        #expect(busy.state == .closed && busy.queuedRequests == 0)
        #expect(busy.answerReady(now: Self.at(2)) == .discard, "the chain's answer, too late")
        #expect(busy.drainEnded() == .none)

        // Not quiesced first (the group was cancelled at once): the same.
        var answering = Self.answering()
        #expect(answering.drainEnded() == .refuse(unanswered: []))

        // Nothing being answered: close, with what was read.
        var idle = Self.active()
        #expect(idle.drainEnded() == .close(unanswered: []))
        var blocked = Self.answering()
        _ = blocked.requestParsed("b", keepAlive: true, bodyBytes: 0, now: Self.at(0))
        _ = blocked.writabilityChanged(writable: false, now: Self.at(1))
        _ = blocked.answerReady(now: Self.at(1))
        #expect(blocked.drainEnded() == .close(unanswered: ["b"]), "the answer before it went out; b never began")

        // The last answer's head is out (a stream, or the last answer being sent): close.
        var last = Self.answering(keepAlive: false)
        _ = last.answerReady(now: Self.at(1))
        #expect(last.drainEnded() == .close(unanswered: []))
        var unborn = Machine(limits: Self.limits)
        #expect(unborn.drainEnded() == .close(unanswered: []))
    }

    @Test("the client's end of input closes an idle connection; a busy one answers first and closes without lingering")
    func inputClosed() {
        var idle = Self.active()
        #expect(idle.inputClosed(now: Self.at(1)) == .close)

        var busy = Self.answering()
        #expect(busy.inputClosed(now: Self.at(1)) == .none)
        #expect(busy.answerReady(now: Self.at(2)) == .write(close: true))
        #expect(busy.outputShut(now: Self.at(3)) == .close)
    }

    @Test("input closed in the middle of a body: what was read whole is answered, the rest is dropped")
    func inputClosedMidBody() {
        var machine = Self.answering()
        _ = machine.inputProgressed(.body, now: Self.at(1))
        #expect(machine.inputClosed(now: Self.at(2)) == .none)
        #expect(machine.bytesRead() == .discard)
        #expect(machine.answerReady(now: Self.at(3)) == .write(close: true))
    }

    @Test("lingering ends when its time is up")
    func lingerTime() {
        var machine = Self.active()
        _ = machine.requestFailed(.malformed("x"), now: Self.at(1))
        #expect(machine.outputShut(now: Self.at(1)) == .linger(until: Self.at(3)))
        #expect(machine.timerFired(now: Self.at(2)) == .rearm(Self.at(3)))
        #expect(machine.timerFired(now: Self.at(3)) == .close)
    }

    @Test("a last answer the client never reads is given up after idle_timeout")
    func lastAnswerNeverSent() {
        var machine = Self.answering(keepAlive: false)
        #expect(machine.answerReady(now: Self.at(1)) == .write(close: true))
        #expect(machine.timerFired(now: Self.at(75)) == .rearm(Self.at(76)))
        #expect(machine.timerFired(now: Self.at(76)) == .close)
    }

    // MARK: Events that cannot apply

    @Test("after close: an answer is discarded, the timer, writability, more input and a quiesce change nothing")
    func afterClose() {
        var machine = Self.answering()
        #expect(machine.errorCaught() == .close)
        #expect(machine.errorCaught() == .none)
        #expect(machine.channelInactive() == .cancelTimer, "the timer set at activation")
        #expect(machine.answerReady(now: Self.at(1)) == .discard)
        #expect(machine.answerWritten(now: Self.at(1)) == .none)
        #expect(machine.timerFired(now: Self.at(100)) == .none)
        #expect(machine.writabilityChanged(writable: true, now: Self.at(1)) == .none)
        #expect(machine.bytesRead() == .discard)
        #expect(machine.requestParsed("b", keepAlive: true, bodyBytes: 0, now: Self.at(0)) == .drop)
        #expect(machine.requestFailed(.timedOut, now: Self.at(1)) == .none)
        #expect(machine.inputProgressed(.head, now: Self.at(1)) == .none)
        #expect(machine.inputClosed(now: Self.at(1)) == .none)
        #expect(machine.quiesce(now: Self.at(1)) == .none)
        #expect(machine.outputShut(now: Self.at(1)) == .none)
        #expect(machine.continueExpected() == .none)
        #expect(machine.channelInactive() == .none)
        #expect(machine.state == .closed)
    }

    @Test("an answer that comes after the connection began its close is discarded")
    func answerWhileLingering() {
        var machine = Self.answering()
        _ = machine.requestParsed("b", keepAlive: false, bodyBytes: 0, now: Self.at(0))
        _ = machine.answerReady(now: Self.at(1))
        _ = machine.answerWritten(now: Self.at(1))
        _ = machine.answerReady(now: Self.at(1))
        _ = machine.outputShut(now: Self.at(1))
        #expect(machine.answerReady(now: Self.at(2)) == .discard)
        #expect(machine.requestParsed("c", keepAlive: true, bodyBytes: 0, now: Self.at(0)) == .drop)
    }

    @Test("before activation nothing is read; a quiesce closes")
    func beforeActivation() {
        var machine = Machine(limits: Self.limits)
        #expect(machine.bytesRead() == .discard)
        #expect(machine.requestParsed("a", keepAlive: true, bodyBytes: 0, now: Self.at(0)) == .drop)
        #expect(machine.timerFired(now: Self.at(1)) == .none)
        #expect(machine.quiesce(now: Self.at(1)) == .close)
    }

    @Test("an answer for a request never handed out is a bug, and stops the process")
    func answerWithoutRequest() async {
        await #expect(processExitsWith: .failure) {
            var machine = ServerConnectionStateMachine<String>(limits: ServerConnectionStateMachineTests.limits)
            _ = machine.channelActive(now: .uptimeNanoseconds(0))
            _ = machine.answerReady(now: .uptimeNanoseconds(1))
        }
    }
}
