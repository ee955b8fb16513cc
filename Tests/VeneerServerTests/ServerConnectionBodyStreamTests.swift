import NIOCore
import Testing
@testable import VeneerServer

/// The server connection's state machine with an answer whose body streams from the upstream
/// (``VeneerCore/BodyStream``): parts asked for only while the output takes more, the queue
/// waiting behind it, the client that stops reading or leaves, and the upstream that fails.
@Suite("Server connection state machine: streamed bodies")
struct ServerConnectionBodyStreamTests {
    typealias Machine = ServerConnectionStateMachine<String>
    static func at(_ seconds: Double) -> NIODeadline { ServerConnectionStateMachineTests.at(seconds) }

    /// A machine whose answer to "a" has a streamed body, started at time 1.
    static func sending(keepAlive: Bool = true) -> Machine {
        var machine = ServerConnectionStateMachineTests.answering(keepAlive: keepAlive)
        #expect(machine.bodyStreamReady(now: at(1)) == .start(close: !keepAlive))
        return machine
    }

    @Test("parts are asked for while the output takes them; the end frees the connection for the next request")
    func partsThenEnd() {
        var machine = Self.sending()
        #expect(machine.bodyPartWritten() == true)
        #expect(machine.bodyEnded(now: Self.at(2)) == .none)
        #expect(machine.state == .open(.waiting(since: Self.at(0)), .idle(since: Self.at(2))))
    }

    @Test("a client that does not read: no part is asked for until the output drains, and then one is")
    func backpressure() {
        var machine = Self.sending()
        #expect(machine.writabilityChanged(writable: false, now: Self.at(2)) == .pauseReading)
        #expect(machine.bodyPartWritten() == false, "the part in hand is written; no next one is read from the upstream")
        #expect(machine.writabilityChanged(writable: true, now: Self.at(3)) == .readBody)
        #expect(machine.bodyPartWritten() == true)
    }

    @Test("a client that reads nothing of the body for idle_timeout is closed (its upstream connection then too)")
    func unreadBody() {
        var machine = Self.sending()
        _ = machine.writabilityChanged(writable: false, now: Self.at(2))
        #expect(machine.timerFired(now: Self.at(50)) == .rearm(Self.at(77)))
        #expect(machine.timerFired(now: Self.at(77)) == .close)
        #expect(machine.state == .closed)
    }

    @Test("a body that keeps flowing is never idle, however long it lasts")
    func longBody() {
        var machine = Self.sending()
        #expect(machine.timerFired(now: Self.at(500)) == .rearm(Self.at(575)))
        #expect(machine.bodyPartWritten() == true)
    }

    @Test("requests pipelined behind a streamed body wait for its end")
    func queueBehind() {
        var machine = Self.sending()
        #expect(machine.requestParsed("b", keepAlive: true, bodyBytes: 0, now: Self.at(2)) == .wait(pauseReading: false))
        #expect(machine.bodyEnded(now: Self.at(3)) == .answer("b"))
    }

    @Test("the last answer's body (Connection: close) ends the connection when it ends")
    func lastAnswer() {
        var machine = Self.sending(keepAlive: false)
        #expect(machine.bodyPartWritten() == true)
        #expect(machine.bodyEnded(now: Self.at(2)) == .end)
        #expect(machine.state == .closingOutput(since: Self.at(2), inputEnded: false))
    }

    @Test("the upstream fails mid-body: the head is out, so the connection closes, and the queue is dropped")
    func upstreamFails() {
        var machine = Self.sending()
        _ = machine.requestParsed("b", keepAlive: true, bodyBytes: 0, now: Self.at(2))
        #expect(machine.bodyFailed() == .close)
        #expect(machine.state == .closed)
        #expect(machine.queuedRequests == 0)
        #expect(machine.bodyFailed() == .none, "once")
        #expect(machine.bodyPartWritten() == false)
    }

    @Test("the client leaves mid-body: the channel goes, and nothing more is asked of the body")
    func clientLeaves() {
        var machine = Self.sending()
        #expect(machine.channelInactive() == .cancelTimer)
        #expect(machine.bodyPartWritten() == false)
        #expect(machine.bodyEnded(now: Self.at(2)) == .none)
    }

    @Test("a stream answer for a connection already gone is discarded (its upstream connection closed)")
    func discarded() {
        var machine = ServerConnectionStateMachineTests.answering()
        _ = machine.errorCaught()
        #expect(machine.bodyStreamReady(now: Self.at(1)) == .discard)
    }

    @Test("graceful shutdown mid-body: the body is sent whole, then the connection ends")
    func quiesce() {
        var machine = Self.sending()
        #expect(machine.quiesce(now: Self.at(2)) == .none)
        #expect(machine.bodyPartWritten() == true)
        #expect(machine.bodyEnded(now: Self.at(3)) == .end)
    }

    @Test("drain_timeout mid-body: the connection closes (its head is out: no 503)")
    func drainEnded() {
        var machine = Self.sending()
        #expect(machine.drainEnded() == .close(unanswered: []))
    }

    @Test("the client closes its side mid-body: the body still goes out, then the connection closes")
    func inputClosed() {
        var machine = Self.sending()
        #expect(machine.inputClosed(now: Self.at(2)) == .none)
        #expect(machine.bodyPartWritten() == true)
        #expect(machine.bodyEnded(now: Self.at(3)) == .end)
    }
}
