import Testing
@testable import VeneerOrigins

/// One request's life as its caller sees it, without a socket: the waiter is told once.
@Suite("Upstream exchange state machine")
struct UpstreamExchangeStateMachineTests {
    typealias Machine = UpstreamExchangeStateMachine<String>

    @Test("started, then finished: the waiter is handed out once; a late cancel or finish does nothing")
    func finishOnce() {
        var machine = Machine()
        guard case .submit = machine.start("caller") else {
            Issue.record("a fresh request is submitted")
            return
        }
        #expect(machine.cancel() == .cancelInPool, "while in the pool, a cancel reaches the pool")
        #expect(machine.finish() == "caller")
        #expect(machine.finish() == nil, "finish twice: nobody to tell")
        #expect(machine.cancel() == .none, "cancel after finish")
    }

    @Test("cancelled before it reached the loop: it is never submitted, and its waiter fails at once")
    func cancelledOnTheWay() {
        var machine = Machine()
        #expect(machine.cancel() == .none)
        #expect(machine.cancel() == .none, "twice")
        guard case .failCancelled(let waiter) = machine.start("caller") else {
            Issue.record("a cancelled request is not submitted")
            return
        }
        #expect(waiter == "caller")
        #expect(machine.finish() == nil, "already told")
    }

    /// A request in the pool whose body streams after its head.
    func sending() -> Machine {
        var machine = Machine()
        guard case .submit = machine.start("caller", streamsBody: true) else {
            Issue.record("a fresh request is submitted")
            return machine
        }
        #expect(machine.requestBody == .sending)
        return machine
    }

    @Test("a streamed request body: a part sent asks for the next; its end leaves the answer to come, and the connection reusable")
    func requestBodySent() {
        var machine = sending()
        #expect(machine.requestBodyPartSent(), "the next part is wanted")
        _ = machine.requestBodyEnded()
        #expect(machine.requestBody == .sent)
        #expect(!machine.requestBodyPartSent(), "nothing after the end")
        let reusable = machine.answerComplete(keepAlive: true)
        #expect(reusable, "sent whole: the connection may carry the next request")
        #expect(machine.finish() == "caller")
        #expect(!machine.requestBodyPartSent() && machine.requestBody == nil)
    }

    @Test("timeouts of an upload (nginx's proxy_send_timeout, then proxy_read_timeout): while the body is being sent a written part has body_timeout to be taken; the wait for the head (timeout) starts once the body has been sent")
    func uploadTimeouts() {
        var machine = sending()
        #expect(machine.requestBodyPartWritten(), "a part written while sending: the upstream has body_timeout to take it")
        let ended = machine.requestBodyEnded()
        #expect(ended, "sent whole, no answer yet: the wait for the head starts now")
        #expect(!machine.requestBodyPartWritten(), "nothing more to send: no send deadline")
        let late = machine.requestBodySendTimedOut()
        #expect(late == .none, "a late send timer finds nothing to cut")
        let again = machine.requestBodyEnded()
        #expect(!again, "once")
        var early = sending()
        _ = early.finish(streamed: true)
        let earlyEnded = early.requestBodyEnded()
        #expect(!earlyEnded, "the head came first (an early answer): there is no head to wait for")
        var whole = Machine()
        _ = whole.start("caller")
        let wholeEnded = whole.requestBodyEnded()
        #expect(!whole.requestBodyPartWritten() && !wholeEnded, "a body sent whole keeps its deadline from the start")
    }

    @Test("the upstream stops taking the body for body_timeout: before the answer the exchange fails (the connection closes), while an answer streams that answer is cut; once")
    func uploadSendTimedOut() {
        var machine = sending()
        let first = machine.requestBodySendTimedOut()
        #expect(first == .failExchange)
        #expect(!machine.requestBodyPartSent() && !machine.requestBodyPartWritten(), "nothing more is sent")
        #expect(!machine.mayRetryBeforeAnswer)
        let second = machine.requestBodySendTimedOut()
        #expect(second == .none, "once")
        #expect(machine.finish() == "caller", "the pool tells the caller")
        var answered = sending()
        _ = answered.finish(streamed: true)
        let cut = answered.requestBodySendTimedOut()
        #expect(cut == .cutAnswer)
        let left = answered.clientLeft()
        #expect(!left, "over")
    }

    @Test("the client stops sending mid-body before the answer: the exchange fails, nothing more is sent, never retried")
    func requestBodyCutBeforeAnswer() {
        var machine = sending()
        #expect(machine.requestBodyCut() == .failExchange)
        #expect(!machine.requestBodyPartSent())
        #expect(!machine.mayRetryBeforeAnswer)
        #expect(machine.requestBodyCut() == .none, "once")
        #expect(machine.finish() == "caller", "the pool tells the caller")
    }

    @Test("the client stops sending while the answer streams: the answer's stream is cut")
    func requestBodyCutWhileAnswerStreams() {
        var machine = sending()
        #expect(machine.finish(streamed: true) == "caller")
        #expect(machine.requestBodyPartSent(), "an answer under way does not stop the body")
        #expect(machine.requestBodyCut() == .cutAnswer)
        let closes = machine.clientLeft()
        let cuts = machine.upstreamFailedMidBody()
        #expect(!closes && !cuts, "over: nothing more to cut")
    }

    @Test("an early answer while the body is still being sent (a 413): passed, the connection not reused, no more parts")
    func earlyAnswer() {
        var machine = sending()
        let reusable = machine.answerComplete(keepAlive: true)
        #expect(!reusable, "the upstream is owed the rest: never reused")
        #expect(machine.finish() == "caller")
        #expect(!machine.requestBodyPartSent(), "the rest of the body is not sent")
        #expect(machine.requestBodyCut() == .none, "answered already: nothing more to report")
    }

    @Test("an early streamed answer that ends while the body is still being sent: not reused")
    func earlyStreamedAnswer() {
        var machine = sending()
        _ = machine.finish(streamed: true)
        machine.answerBodyStarted()
        let reusable = machine.answerComplete(keepAlive: true)
        #expect(!reusable)
        #expect(!machine.requestBodyPartSent())
    }

    @Test("closed before the answer: retried only with a whole body (a streamed one was taken from its stream, in part or whole)", arguments: [false, true])
    func retryBeforeAnswer(ended: Bool) {
        var whole = Machine()
        _ = whole.start("caller")
        #expect(whole.mayRetryBeforeAnswer)
        var machine = sending()
        if ended { _ = machine.requestBodyEnded() }
        #expect(!machine.mayRetryBeforeAnswer)
    }

    @Test("a streamed answer: head to the waiter, unread until its consumer starts (no part read for nobody), parts wanted and arriving, its end")
    func streamedAnswer() {
        var machine = Machine()
        _ = machine.start("caller")
        #expect(machine.finish(streamed: true) == "caller")
        #expect(machine.cancel() == .none, "the caller holds the stream: its task's cancel is no longer the pool's business")
        #expect(!machine.answerPartWanted(), "nobody reads yet")
        #expect(!machine.answerPartArrived(), "a part before a consumer ends no pause: the head's deadline runs on")
        machine.answerBodyStarted()
        #expect(machine.answerPartWanted())
        #expect(machine.answerPartArrived(), "a part ends a pause")
        let reusable = machine.answerComplete(keepAlive: true)
        #expect(reusable, "a whole body: the connection goes back to the pool")
        let closes = machine.clientLeft()
        let cuts = machine.upstreamFailedMidBody()
        #expect(!machine.answerPartWanted() && !closes && !cuts, "over")
    }

    @Test("the client leaves mid-body: the connection is closed, never returned to the pool dirty; once")
    func clientLeaves() {
        var machine = Machine()
        _ = machine.start("caller")
        _ = machine.finish(streamed: true)
        machine.answerBodyStarted()
        let first = machine.clientLeft()
        #expect(first)
        let again = machine.clientLeft()
        #expect(!again, "once")
        #expect(!machine.answerPartWanted())
    }

    @Test("the upstream fails mid-body: its stream is cut (the client's connection closes: its status line is out); once")
    func upstreamFailsMidBody() {
        var machine = Machine()
        _ = machine.start("caller")
        let beforeHead = machine.upstreamFailedMidBody()
        #expect(!beforeHead, "no answer yet: the pool fails the waiter instead")
        _ = machine.finish(streamed: true)
        let cut = machine.upstreamFailedMidBody()
        #expect(cut)
        let closesAfter = machine.clientLeft()
        let cutAgain = machine.upstreamFailedMidBody()
        #expect(!cutAgain && !closesAfter)
    }
}
