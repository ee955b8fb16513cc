import NIOCore
import Testing
@testable import VeneerServer

/// The server connection's state machine with a request body that streams to the chain
/// (an upload): handed out at its head, read only while its consumer wants parts, cut when
/// its client leaves or pauses, and the connection's last when its answer comes early.
@Suite("Server connection state machine: request bodies that stream")
struct ServerConnectionUploadTests {
    typealias Machine = ServerConnectionStateMachine<String>
    static let limits = ServerConnectionStateMachineTests.limits
    static func at(_ seconds: Double) -> NIODeadline { ServerConnectionStateMachineTests.at(seconds) }

    /// A machine answering "u", whose body streams (handed out at time 0, nothing wanted yet).
    static func uploading(keepAlive: Bool = true) -> Machine {
        var machine = ServerConnectionStateMachineTests.active()
        #expect(machine.streamedRequestParsed("u", keepAlive: keepAlive, now: at(0)) == .answer(pauseReading: true))
        return machine
    }

    @Test("its head hands the request out at once, reading paused; the socket is read only while a part is wanted")
    func demandDrivesReading() {
        var machine = Self.uploading()
        #expect(machine.state == .open(.streamingBody(since: Self.at(0), wanted: false, last: false), .answering(keepAlive: true, writable: true)))
        #expect(!machine.readsRequests)
        #expect(machine.bytesRead() == .keep, "a read already under way is kept, not parsed")
        #expect(machine.uploadDemanded(now: Self.at(1)) == .read(armTimer: Self.at(31)))
        #expect(machine.readsRequests)
        #expect(machine.bytesRead() == .parse)
        #expect(machine.uploadDemanded(now: Self.at(1)) == .none, "wanted already")
        // A part that the consumer did not want more after: reading pauses.
        #expect(machine.uploadPartRead(wanted: false, now: Self.at(2)) == .pauseReading)
        #expect(!machine.readsRequests)
        #expect(machine.uploadDemanded(now: Self.at(3)) == .read(armTimer: nil), "the timer is already due earlier")
        #expect(machine.uploadPartRead(wanted: true, now: Self.at(4)) == .none, "wanted on: read on")
        #expect(machine.readsRequests)
    }

    @Test("its end lets the next request be read; the answer then keeps the connection")
    func endThenAnswer() {
        var machine = Self.uploading()
        _ = machine.uploadDemanded(now: Self.at(1))
        #expect(machine.uploadEnded(now: Self.at(2)) == .resumeReading)
        #expect(machine.state == .open(.waiting(since: Self.at(2)), .answering(keepAlive: true, writable: true)))
        #expect(machine.answerReady(now: Self.at(3)) == .write(close: false))
        #expect(machine.answerWritten(now: Self.at(3)) == .none)
        #expect(machine.state == .open(.waiting(since: Self.at(2)), .idle(since: Self.at(3))))
    }

    @Test("with Connection: close, its end stops reading and its answer is the last")
    func lastUpload() {
        var machine = Self.uploading(keepAlive: false)
        _ = machine.uploadDemanded(now: Self.at(1))
        #expect(machine.uploadEnded(now: Self.at(2)) == .none)
        #expect(!machine.readsRequests)
        #expect(machine.answerReady(now: Self.at(3)) == .write(close: true))
    }

    @Test("an answer before the body's end (an upstream's early 413) is written with Connection: close; nothing more is read")
    func earlyAnswer() {
        var machine = Self.uploading()
        _ = machine.uploadDemanded(now: Self.at(1))
        #expect(machine.answerReady(now: Self.at(2)) == .write(close: true))
        #expect(!machine.readsRequests)
        #expect(machine.bytesRead() == .discard)
        // Its consumer leaving first (the transport dropped the body) comes to the same.
        var cancelled = Self.uploading()
        #expect(cancelled.uploadCancelled() == .none)
        #expect(cancelled.bytesRead() == .discard)
        #expect(cancelled.answerReady(now: Self.at(2)) == .write(close: true))
        // An early answer whose body streams ends the connection too.
        var streamed = Self.uploading()
        #expect(streamed.bodyStreamReady(now: Self.at(2)) == .start(close: true))
    }

    @Test("the client leaving mid-body cuts it; the answer, if it comes, ends the connection")
    func clientLeaves() {
        var machine = Self.uploading()
        _ = machine.uploadDemanded(now: Self.at(1))
        #expect(machine.inputClosed(now: Self.at(2)) == .cutUpload)
        #expect(machine.state == .closing(.answering(keepAlive: true, writable: true), final: nil, inputEnded: true))
        #expect(machine.answerReady(now: Self.at(3)) == .write(close: true))
        #expect(machine.outputShut(now: Self.at(3)) == .close)
    }

    @Test("a pause longer than body_timeout while a part is wanted cuts the body; none runs while nothing is wanted")
    func pause() {
        var machine = Self.uploading()
        // Nothing wanted (the upstream is slow): no deadline of the client's.
        #expect(machine.timerFired(now: Self.at(60)) == .rearm(Self.at(135)))
        _ = machine.uploadDemanded(now: Self.at(60))
        #expect(machine.timerFired(now: Self.at(80)) == .rearm(Self.at(90)), "not due yet")
        _ = machine.uploadPartRead(wanted: true, now: Self.at(85))
        #expect(machine.timerFired(now: Self.at(90)) == .rearm(Self.at(115)), "each part moves the deadline")
        #expect(machine.timerFired(now: Self.at(115)) == .cutUpload(rearm: Self.at(190)))
        #expect(machine.state == .closing(.answering(keepAlive: true, writable: true), final: nil, inputEnded: false))
        #expect(machine.answerReady(now: Self.at(116)) == .write(close: true))
    }

    @Test("a malformed chunk cuts the body (its request is with the chain already)")
    func malformedChunk() {
        var machine = Self.uploading()
        _ = machine.uploadDemanded(now: Self.at(1))
        #expect(machine.requestFailed(.malformed("A chunk size is not valid."), now: Self.at(2)) == .cutUpload)
        #expect(machine.answerReady(now: Self.at(3)) == .write(close: true))
    }

    @Test("behind an answer in progress it waits with reading paused, and its body is read once it is handed out")
    func waitsItsTurn() {
        var machine = ServerConnectionStateMachineTests.answering()
        #expect(machine.streamedRequestParsed("u", keepAlive: true, now: Self.at(1)) == .wait(pauseReading: true))
        #expect(!machine.readsRequests)
        #expect(machine.answerReady(now: Self.at(2)) == .write(close: false))
        #expect(machine.answerWritten(now: Self.at(2)) == .answer("u"))
        #expect(machine.state == .open(.streamingBody(since: Self.at(2), wanted: false, last: false), .answering(keepAlive: true, writable: true)))
        #expect(machine.uploadDemanded(now: Self.at(3)) == .read(armTimer: Self.at(33)))
    }

    @Test("a waiting upload whose client closes is dropped: its body can never come")
    func waitingClientLeaves() {
        var machine = ServerConnectionStateMachineTests.answering()
        _ = machine.streamedRequestParsed("u", keepAlive: true, now: Self.at(1))
        #expect(machine.inputClosed(now: Self.at(2)) == .none)
        #expect(machine.queuedRequests == 0)
        #expect(machine.answerReady(now: Self.at(3)) == .write(close: true))
    }

    @Test("graceful shutdown lets an upload on its way finish, then the connection closes")
    func quiesce() {
        var machine = Self.uploading()
        _ = machine.uploadDemanded(now: Self.at(1))
        #expect(machine.quiesce(now: Self.at(2)) == .none)
        #expect(machine.readsRequests, "its body is still read")
        #expect(machine.uploadEnded(now: Self.at(3)) == .none)
        #expect(!machine.readsRequests, "nothing after it is read")
        #expect(machine.answerReady(now: Self.at(4)) == .write(close: true))
    }

    @Test("the answers' output turning unwritable does not pause the body: its consumer paces it")
    func writabilityDoesNotPause() {
        var machine = Self.uploading()
        _ = machine.uploadDemanded(now: Self.at(1))
        #expect(machine.writabilityChanged(writable: false, now: Self.at(2)) == .none)
        #expect(machine.readsRequests)
    }

    @Test("upload events change nothing where no body streams")
    func impossibleEvents() {
        var machine = ServerConnectionStateMachineTests.answering()
        let before = machine.state
        #expect(machine.uploadDemanded(now: Self.at(1)) == .none)
        #expect(machine.uploadPartRead(wanted: false, now: Self.at(1)) == .none)
        #expect(machine.uploadEnded(now: Self.at(1)) == .none)
        #expect(machine.uploadCancelled() == .none)
        #expect(machine.state == before)
    }
}
