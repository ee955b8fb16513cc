import NIOCore
import Testing
@testable import VeneerServer

/// The server connection's state machine while it writes a streamed answer (server-sent
/// events), event by event: the stream is the connection's last answer, no idle or head
/// deadline cuts it, a client that does not read loses chunks, and shutdown, the client's
/// close and a reset each end it.
@Suite("Server connection state machine: streamed answers")
struct ServerConnectionStreamingTests {
    typealias Machine = ServerConnectionStateMachine<String>

    static func at(_ seconds: Double) -> NIODeadline {
        ServerConnectionStateMachineTests.at(seconds)
    }

    /// A machine writing a stream for "a", begun at time 0.
    static func streaming() -> Machine {
        var machine = ServerConnectionStateMachineTests.answering()
        #expect(machine.streamReady(now: at(0)) == .start)
        return machine
    }

    @Test("a stream is the connection's last answer: the requests behind it are dropped, and input is read only to be discarded")
    func lastAnswer() {
        var machine = ServerConnectionStateMachineTests.answering()
        #expect(machine.requestParsed("b", keepAlive: true, bodyBytes: 10, now: Self.at(0)) == .wait(pauseReading: false))
        #expect(machine.streamReady(now: Self.at(1)) == .start)
        #expect(machine.state == .streaming(blockedSince: nil))
        #expect(machine.queuedRequests == 0)
        #expect(!machine.readsRequests)
        #expect(machine.bytesRead() == .discard)
        #expect(machine.requestParsed("c", keepAlive: true, bodyBytes: 0, now: Self.at(2)) == .drop)
        #expect(machine.chunkReady() == .write)
    }

    @Test("no idle or head deadline cuts a stream that is being written, however long it lasts")
    func noDeadline() {
        var machine = Self.streaming()
        #expect(machine.inputProgressed(.head, now: Self.at(1)) == .none)
        #expect(machine.timerFired(now: Self.at(75)) == .rearm(Self.at(150)))
        #expect(machine.timerFired(now: Self.at(10_000)) == .rearm(Self.at(10_075)))
        #expect(machine.chunkReady() == .write)
    }

    @Test("while the client does not read, chunks are dropped; once it reads, they are written again")
    func slowClient() {
        var machine = Self.streaming()
        #expect(machine.writabilityChanged(writable: false, now: Self.at(10)) == .none, "the timer set for 75 s comes first")
        #expect(machine.state == .streaming(blockedSince: Self.at(10)))
        #expect(machine.chunkReady() == .drop)
        #expect(machine.writabilityChanged(writable: false, now: Self.at(20)) == .none)
        #expect(machine.state == .streaming(blockedSince: Self.at(10)), "blocked since it first was")
        #expect(machine.writabilityChanged(writable: true, now: Self.at(30)) == .none)
        #expect(machine.chunkReady() == .write)
        #expect(machine.timerFired(now: Self.at(75)) == .rearm(Self.at(150)), "reading again: not idle")
    }

    @Test("a stream whose client reads nothing for idle_timeout is closed")
    func clientNeverReads() {
        var machine = Self.streaming()
        _ = machine.timerFired(now: Self.at(75))
        #expect(machine.writabilityChanged(writable: false, now: Self.at(80)) == .none)
        #expect(machine.timerFired(now: Self.at(150)) == .rearm(Self.at(155)))
        #expect(machine.timerFired(now: Self.at(155)) == .close)
        #expect(machine.state == .closed)
        #expect(machine.chunkReady() == .stop)
    }

    @Test("a stream blocked from its start (the output was full) sets its deadline at once")
    func blockedAtStart() {
        var machine = ServerConnectionStateMachineTests.answering()
        _ = machine.timerFired(now: Self.at(75))
        #expect(machine.writabilityChanged(writable: false, now: Self.at(100)) == .pauseReading)
        #expect(machine.streamReady(now: Self.at(100)) == .start)
        #expect(machine.state == .streaming(blockedSince: Self.at(100)))
        #expect(machine.chunkReady() == .drop)
        #expect(machine.timerFired(now: Self.at(150)) == .rearm(Self.at(175)))
        #expect(machine.timerFired(now: Self.at(175)) == .close)
    }

    @Test("when its chunks end, the stream ends as any last answer: the output is shut, then the connection lingers")
    func chunksEnd() {
        var machine = Self.streaming()
        #expect(machine.streamFinished(now: Self.at(5)) == .end)
        #expect(machine.state == .closingOutput(since: Self.at(5), inputEnded: false))
        #expect(machine.chunkReady() == .stop)
        #expect(machine.streamFinished(now: Self.at(6)) == .none, "a second end changes nothing")
        #expect(machine.outputShut(now: Self.at(6)) == .linger(until: Self.at(8)))
    }

    @Test("graceful shutdown ends a stream at once: its iteration stops and the output is shut")
    func shutdown() {
        var machine = Self.streaming()
        #expect(machine.quiesce(now: Self.at(5)) == .endStream)
        #expect(machine.state == .closingOutput(since: Self.at(5), inputEnded: false))
        #expect(machine.chunkReady() == .stop)
        #expect(machine.streamFinished(now: Self.at(5)) == .none, "the iteration's end, once stopped, changes nothing")
        #expect(machine.quiesce(now: Self.at(6)) == .none)
        #expect(machine.outputShut(now: Self.at(6)) == .linger(until: Self.at(8)))
    }

    @Test("graceful shutdown closes at once a stream whose client does not read: nothing it waits for is worth waiting")
    func shutdownBlocked() {
        var machine = Self.streaming()
        _ = machine.writabilityChanged(writable: false, now: Self.at(1))
        #expect(machine.quiesce(now: Self.at(2)) == .close)
        #expect(machine.state == .closed)
    }

    @Test("a stream asked for after graceful shutdown began gets its head alone, as the last answer")
    func afterShutdown() {
        var machine = ServerConnectionStateMachineTests.answering()
        _ = machine.requestParsed("b", keepAlive: true, bodyBytes: 0, now: Self.at(0))
        #expect(machine.quiesce(now: Self.at(1)) == .none)
        #expect(machine.streamReady(now: Self.at(2)) == .headOnly)
        #expect(machine.state == .closingOutput(since: Self.at(2), inputEnded: false))
        #expect(machine.queuedRequests == 0)
        #expect(machine.answerWritten(now: Self.at(2)) == .none)
    }

    @Test("a stream asked for with Connection: close (an HTTP/1.0 client) is written: it ends the connection anyway")
    func closeRequested() {
        var machine = ServerConnectionStateMachineTests.answering(keepAlive: false)
        #expect(machine.streamReady(now: Self.at(1)) == .start)
        #expect(machine.state == .streaming(blockedSince: nil))
    }

    @Test("the client closing its side ends the stream and the connection")
    func clientCloses() {
        var machine = Self.streaming()
        #expect(machine.inputClosed(now: Self.at(3)) == .close)
        #expect(machine.state == .closed)
        #expect(machine.chunkReady() == .stop)
        #expect(machine.streamFinished(now: Self.at(3)) == .none)
    }

    @Test("a stream for a client that closed its side already gets its head alone, then the connection closes")
    func clientClosedBefore() {
        var machine = ServerConnectionStateMachineTests.answering()
        #expect(machine.inputClosed(now: Self.at(1)) == .none)
        #expect(machine.streamReady(now: Self.at(2)) == .headOnly)
        #expect(machine.outputShut(now: Self.at(2)) == .close)
    }

    @Test("a reset ends the stream; a stream for a connection already gone is discarded")
    func reset() {
        var machine = Self.streaming()
        #expect(machine.errorCaught() == .close)
        #expect(machine.chunkReady() == .stop)
        #expect(machine.channelInactive() == .cancelTimer)

        var gone = ServerConnectionStateMachineTests.answering()
        _ = gone.errorCaught()
        #expect(gone.streamReady(now: Self.at(1)) == .discard)
    }

    @Test("while streaming, events of requests and answers change nothing")
    func eventsThatCannotApply() {
        var machine = Self.streaming()
        #expect(machine.continueExpected() == .none)
        #expect(machine.requestFailed(.malformed("x"), now: Self.at(1)) == .none)
        #expect(machine.answerWritten(now: Self.at(1)) == .none)
        #expect(machine.outputShut(now: Self.at(1)) == .none)
        #expect(machine.channelActive(now: Self.at(1)) == .none)
        #expect(machine.state == .streaming(blockedSince: nil))
    }

    @Test("an answer while streaming is a bug (no request was handed out), and stops the process")
    func answerWhileStreaming() async {
        await #expect(processExitsWith: .failure) {
            var machine = ServerConnectionStateMachine<String>(limits: ServerConnectionStateMachineTests.limits)
            _ = machine.channelActive(now: .uptimeNanoseconds(0))
            _ = machine.requestParsed("a", keepAlive: true, bodyBytes: 0, now: .uptimeNanoseconds(0))
            _ = machine.streamReady(now: .uptimeNanoseconds(1))
            _ = machine.answerReady(now: .uptimeNanoseconds(2))
        }
    }
}
