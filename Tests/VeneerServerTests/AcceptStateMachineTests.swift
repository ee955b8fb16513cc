@testable import VeneerServer
import NIOCore
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite("Accept state machine: backoff out of descriptors, the connections limit")
struct AcceptStateMachineTests {
    let emfile = AcceptStateMachine.AcceptFailure(IOError(errnoCode: EMFILE, reason: "accept4"))
    let backoff = AcceptStateMachine.Backoff(minimum: .milliseconds(10), maximum: .milliseconds(40))

    @Test("out of descriptors the socket pauses and holds reads; the retry reads again")
    func outOfDescriptorsPausesAndHoldsReads() {
        var machine = AcceptStateMachine(limit: 10, backoff: backoff)
        #expect(machine.readRequested() == .read)
        #expect(machine.acceptFailed(emfile) == .pause(retryAfter: .milliseconds(10), episodeBegins: true))
        #expect(machine.readRequested() == .hold)
        #expect(machine.retryDue() == .resume)
        #expect(machine.readRequested() == .read)
    }

    @Test("pauses double up to the maximum while accepts keep failing")
    func pausesDoubleUpToTheMaximumWhileAcceptsKeepFailing() {
        var machine = AcceptStateMachine(limit: 10, backoff: backoff)
        var pauses: [TimeAmount] = []
        for _ in 0..<4 {
            if case .pause(let after, _) = machine.acceptFailed(emfile) { pauses.append(after) }
            _ = machine.retryDue()
        }
        #expect(pauses == [.milliseconds(10), .milliseconds(20), .milliseconds(40), .milliseconds(40)])
    }

    @Test("an accept after a pause ends the episode: the next failure pauses briefly again")
    func anAcceptAfterAPauseEndsTheEpisode() {
        var machine = AcceptStateMachine(limit: 10, backoff: backoff)
        _ = machine.acceptFailed(emfile)
        _ = machine.retryDue()
        _ = machine.acceptFailed(emfile)
        _ = machine.retryDue()
        #expect(machine.accepted() == .admit)
        #expect(machine.state == .accepting)
        #expect(machine.acceptFailed(emfile) == .pause(retryAfter: .milliseconds(10), episodeBegins: true))
    }

    @Test("other errors are passed on and change nothing")
    func otherErrorsAreForwardedAndChangeNothing() {
        var machine = AcceptStateMachine(limit: 10, backoff: backoff)
        #expect(machine.acceptFailed(.init(IOError(errnoCode: ECONNABORTED, reason: "accept4"))) == .forward)
        #expect(machine.acceptFailed(.init(ChannelError.ioOnClosedChannel)) == .forward)
        #expect(machine.state == .accepting)
    }

    @Test("EMFILE, ENFILE, ENOBUFS and ENOMEM count as out of resources", arguments: [EMFILE, ENFILE, ENOBUFS, ENOMEM])
    func resourceErrorsCountAsOutOfResources(_ code: CInt) {
        #expect(AcceptStateMachine.AcceptFailure(IOError(errnoCode: code, reason: "accept4")) == .outOfResources)
    }

    @Test("a late failure while paused is ignored")
    func aLateFailureWhilePausedIsIgnored() {
        var machine = AcceptStateMachine(limit: 10, backoff: backoff)
        _ = machine.acceptFailed(emfile)
        #expect(machine.acceptFailed(emfile) == .ignore)
        #expect(machine.state == .paused(pause: .milliseconds(10)))
    }

    @Test("beyond the limit connections are refused until one closes")
    func beyondTheLimitConnectionsAreRefusedUntilOneCloses() {
        var machine = AcceptStateMachine(limit: 2, backoff: backoff)
        #expect(machine.accepted() == .admit)
        #expect(machine.accepted() == .admit)
        #expect(machine.accepted() == .refuse)
        #expect(machine.open == 2)
        machine.connectionClosed()
        #expect(machine.accepted() == .admit)
    }

    @Test("a retry or a failure after the socket closed does nothing")
    func aRetryAfterCloseDoesNothing() {
        var machine = AcceptStateMachine(limit: 2, backoff: backoff)
        _ = machine.acceptFailed(emfile)
        machine.closed()
        #expect(machine.retryDue() == .ignore)
        #expect(machine.acceptFailed(emfile) == .ignore)
    }
}
