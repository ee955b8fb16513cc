import NIOCore
import Testing
@testable import VeneerServer

/// Graceful shutdown and a connection that has not had its first request read (issue 29): it
/// was accepted from the listening socket's queue, its client is sending, and closing it unread
/// would fail a request that a restart under socket activation must not fail.
@Suite("Quiescing before the first request")
struct QuiesceFirstRequestTests {
    typealias Tests = ServerConnectionStateMachineTests

    @Test("a connection quiesced before its first request reads it and answers it with Connection: close")
    func firstRequestAnswered() {
        var machine = Tests.active()
        #expect(machine.quiesce(now: Tests.at(1)) == .armTimer(Tests.at(11)), "header_timeout to send it")
        #expect(machine.readsRequests)
        #expect(machine.bytesRead() == .parse)
        #expect(machine.requestParsed("a", keepAlive: true, bodyBytes: 0, now: Tests.at(1.5)) == .answer(pauseReading: false))
        #expect(machine.answerReady(now: Tests.at(2)) == .write(close: true))
    }

    @Test("a head begun before its first request is read on; one that never comes closes the connection at header_timeout, silently")
    func graceEnds() {
        var begun = Tests.active()
        _ = begun.inputProgressed(.head, now: Tests.at(1))
        #expect(begun.quiesce(now: Tests.at(2)) == .none, "its head deadline (11 s) is armed already")
        #expect(begun.requestParsed("a", keepAlive: true, bodyBytes: 0, now: Tests.at(3)) == .answer(pauseReading: false))

        var silent = Tests.active()
        _ = silent.quiesce(now: Tests.at(1))
        #expect(silent.timerFired(now: Tests.at(11)) == .close)
        #expect(silent.quiesce(now: Tests.at(12)) == .none, "a second quiesce changes nothing")
    }
}
