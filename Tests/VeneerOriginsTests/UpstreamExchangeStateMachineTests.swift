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
}
