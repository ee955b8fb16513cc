import Foundation
import Testing
import VeneerCore
@testable import VeneerDecorators

/// The refresh protocol state by state, event by event: no sockets, no clock, no store.
@Suite("auth_refresh state machine")
struct TokenRefreshStateMachineTests {
    typealias Machine = TokenRefreshStateMachine
    let start = Date(timeIntervalSince1970: 1_800_000_000)
    let unavailable = ProxyError.upstreamUnavailable("The token endpoint failed with HTTP 503.")
    let noAnswer = ProxyError.upstreamTimeout("The token endpoint did not answer a refresh within 5m.")

    func machine(before: Duration = .seconds(30)) -> Machine {
        Machine(initial: .init(initial: "rt-0"), settings: .init(refreshBeforeExpiry: before, refreshWait: .seconds(300)))
    }

    func at(_ seconds: Double) -> Date { start.addingTimeInterval(seconds) }

    /// Runs one refresh from `startAndWait` through the read of `record`, the marker and the send.
    func send(_ machine: inout Machine, record: RefreshTokenRecord? = nil, now: Double = 0) -> String? {
        guard case .markInFlight(let marker) = machine.storeRead(record, now: at(now)) else { return nil }
        #expect(marker.inFlightSince == at(now), "the token is marked in flight before it is sent")
        guard case .send(let token) = machine.markedInFlight(now: at(now)) else { return nil }
        #expect(token == marker.refreshToken)
        return token
    }

    /// A grant of `access` (expiring in `expiresIn` seconds), rotating to `rotated`, saved.
    func grant(_ machine: inout Machine, _ access: String, rotated: String?, expiresIn: Int = 60, now: Double = 0) -> AccessToken? {
        guard case .save(let record) = machine.answered(.granted(accessToken: access, expiresIn: expiresIn, refreshToken: rotated), now: at(now), jitter: 0) else {
            return nil
        }
        #expect(record.inFlightSince == nil, "the saved answer clears the in-flight mark")
        guard case .finish(.success(let token)) = machine.saved() else { return nil }
        return token
    }

    @Test("one refresh at a time: every caller, 401 and timer joins the outstanding one")
    func singleFlight() {
        var machine = machine()
        #expect(machine.tokenWanted(now: at(0)) == .startAndWait)
        #expect(machine.tokenWanted(now: at(0)) == .wait)
        #expect(machine.upstreamRejected(AccessToken(value: "x", expiresAt: nil, generation: 0), now: at(0)) == .wait)
        #expect(machine.timerFired(now: at(0)) == .none)
        #expect(machine.nextWake(now: at(0)) == nil)
        #expect(send(&machine) == "rt-0")
        // Sent: still nothing else may start, and no event re-sends.
        #expect(machine.tokenWanted(now: at(1)) == .wait)
        #expect(machine.timerFired(now: at(1)) == .none)
        #expect(machine.storeRead(nil, now: at(1)) == .ignore, "reading the store again cannot lead to a second send")
        #expect(machine.markedInFlight(now: at(1)) == .ignore)
    }

    @Test("the answer is saved before anything else happens with it; then the token is handed out and used")
    func grantSavedFirst() {
        var machine = machine()
        _ = machine.tokenWanted(now: at(0))
        _ = send(&machine)
        let action = machine.answered(.granted(accessToken: "at-1", expiresIn: 60, refreshToken: "rt-1"), now: at(0), jitter: 0)
        #expect(action == .save(RefreshTokenRecord(refreshToken: "rt-1", origin: RefreshTokenRecord.fingerprint("rt-0"), accessToken: "at-1",
                                                    expiresAt: at(60), generation: 1)))
        // Until saved, the token is nobody's: callers still wait.
        #expect(machine.tokenWanted(now: at(0)) == .wait)
        let token = AccessToken(value: "at-1", expiresAt: at(60), generation: 1)
        #expect(machine.saved() == .finish(.success(token)))
        #expect(machine.state == .idle)
        #expect(machine.tokenWanted(now: at(10)) == .use(token))
        #expect(machine.saved() == .ignore, "a second save report changes nothing")
    }

    @Test("no answer within refresh_wait: stopped, outcome unknown; the token is never sent again by itself, only after a reload")
    func outcomeUnknown() {
        var machine = machine()
        _ = machine.tokenWanted(now: at(0))
        _ = send(&machine)
        _ = grant(&machine, "at-1", rotated: "rt-1", expiresIn: 600)
        _ = machine.upstreamRejected(AccessToken(value: "at-1", expiresAt: at(600), generation: 1), now: at(10))
        #expect(send(&machine, now: 10) == "rt-1")
        #expect(machine.answered(.unknown(noAnswer), now: at(310), jitter: 0) == .finish(.failure(Machine.outcomeUnknown)))
        #expect(machine.state == .stopped(.outcomeUnknown(noAnswer.message)))
        #expect(machine.problem?.hasPrefix("refresh outcome unknown") == true)
        // The access token it still holds is used while it lasts.
        #expect(machine.tokenWanted(now: at(320)) == .use(AccessToken(value: "at-1", expiresAt: at(600), generation: 1)))
        // Nothing starts a refresh: callers, 401s, timers, the store's recovery.
        for later in [601.0, 1000, 100_000] {
            #expect(machine.tokenWanted(now: at(later)) == .fail(Machine.outcomeUnknown))
            #expect(machine.upstreamRejected(AccessToken(value: "at-1", expiresAt: at(600), generation: 1), now: at(later)) == .fail(Machine.outcomeUnknown))
            #expect(machine.timerFired(now: at(later)) == .none)
        }
        #expect(machine.nextWake(now: at(601)) == nil)
        #expect(machine.storeMayBeBack() == .none)
        #expect(machine.answered(.granted(accessToken: "late", expiresIn: 60, refreshToken: "rt-9"), now: at(700), jitter: 0) == .ignore,
                "an answer with no request outstanding is not taken")
        #expect(machine.credentials?.refreshToken == "rt-1")
        // A reload is the operator's decision to try that token again.
        #expect(machine.resume() == true)
        #expect(machine.tokenWanted(now: at(1000)) == .startAndWait)
        #expect(send(&machine, now: 1000) == "rt-1")
    }

    @Test("a failure that proves the token unused (an answer without a grant, never reached) backs off and sends the same token again")
    func backoff() {
        var machine = machine()
        _ = machine.tokenWanted(now: at(0))
        #expect(send(&machine) == "rt-0")
        #expect(machine.answered(.failed(unavailable), now: at(0), jitter: 0) == .finish(.failure(unavailable)))
        #expect(machine.state == .backingOff(until: at(0.5), error: unavailable))
        #expect(machine.tokenWanted(now: at(0.4)) == .fail(unavailable), "callers get the error at once while backing off")
        #expect(machine.nextWake(now: at(0.1)) == at(0.5))
        #expect(machine.tokenWanted(now: at(0.5)) == .startAndWait)
        #expect(send(&machine, now: 0.5) == "rt-0", "the same token: the endpoint did not take it")
        // The backoff doubles (full jitter here) up to a minute.
        var now = 0.5
        var ceilings: [Double] = []
        for _ in 0..<8 {
            _ = machine.answered(.failed(unavailable.neverSent), now: at(now), jitter: 1)
            guard case .backingOff(let until, _) = machine.state else { Issue.record("not backing off"); return }
            ceilings.append(until.timeIntervalSince(at(now)))
            now = until.timeIntervalSince(start)
            #expect(machine.timerFired(now: at(now)) == .startRefresh, "no access token: the loop retries when the backoff ends")
            #expect(send(&machine, now: now) == "rt-0")
        }
        #expect(ceilings == [2, 4, 8, 16, 32, 60, 60, 60])
        _ = grant(&machine, "at-1", rotated: "rt-1", now: now)
        #expect(machine.failures == 0)
    }

    @Test("invalid_grant stops with 401 and drops the access token; a new configured token starts over")
    func invalidGrant() {
        var machine = machine()
        _ = machine.tokenWanted(now: at(0))
        _ = send(&machine)
        #expect(machine.answered(.rejected(reason: "refresh token rejected (invalid_grant)"), now: at(0), jitter: 0)
            == .finish(.failure(Machine.unauthorized("refresh token rejected (invalid_grant)"))))
        #expect(machine.access == nil)
        #expect(machine.tokenWanted(now: at(1)) == .fail(Machine.unauthorized("refresh token rejected (invalid_grant)")))
        #expect(machine.timerFired(now: at(100)) == .none)
        #expect(machine.initialTokenChanged(.init(initial: "rt-0")) == false, "the same token is no change")
        #expect(machine.initialTokenChanged(.init(initial: "rt-new")) == true)
        #expect(machine.state == .idle)
        #expect(machine.timerFired(now: at(101)) == .startRefresh)
        #expect(send(&machine, now: 101) == "rt-new")
    }

    @Test("an unwritable store: nothing is sent, the endpoint's backoff does not grow, and its recovery resumes at once")
    func storeUnwritable() {
        var machine = machine()
        _ = machine.tokenWanted(now: at(0))
        guard case .markInFlight = machine.storeRead(nil, now: at(0)) else { Issue.record("no marker"); return }
        #expect(machine.markFailed("No space left on device") == .finish(.failure(Machine.storeUnwritable)))
        #expect(machine.state == .waitingForStore(reason: "No space left on device"))
        #expect(machine.failures == 0)
        #expect(machine.tokenWanted(now: at(1)) == .fail(Machine.storeUnwritable))
        #expect(machine.timerFired(now: at(1)) == .checkStore(unsaved: nil))
        #expect(machine.nextWake(now: at(1)) == at(2), "tried again every second, never later")
        #expect(machine.storeChecked(.unwritable(reason: "still full", permanent: false)) == false)
        #expect(machine.storageProblem?.contains("still full") == true)
        #expect(machine.storeMayBeBack() == .checkStore(unsaved: nil))
        #expect(machine.storeChecked(.writable) == true)
        #expect(machine.state == .idle)
        // A shared store out of reach while taking its lock: the same, never the endpoint's failure.
        _ = machine.tokenWanted(now: at(2))
        #expect(machine.storeUnavailable("database unreachable") == .finish(.failure(Machine.storeUnwritable)))
        #expect(machine.failures == 0)
        #expect(machine.storeChecked(.writable) == true)
        #expect(machine.tokenWanted(now: at(3)) == .startAndWait)
        #expect(send(&machine, now: 3) == "rt-0")
    }

    @Test("a grant that cannot be saved: its access token is used, its refresh token held, nothing sent until saved, never the older one again")
    func saveFailed() {
        var machine = machine()
        _ = machine.tokenWanted(now: at(0))
        _ = send(&machine)
        _ = grant(&machine, "at-1", rotated: "rt-1", expiresIn: 60)
        _ = machine.tokenWanted(now: at(61))
        let older = RefreshTokenRecord(refreshToken: "rt-1", origin: RefreshTokenRecord.fingerprint("rt-0"), accessToken: "at-1", expiresAt: at(60), generation: 1)
        #expect(send(&machine, record: older, now: 61) == "rt-1")
        guard case .save(let record) = machine.answered(.granted(accessToken: "at-2", expiresIn: 60, refreshToken: "rt-2"), now: at(61), jitter: 0) else {
            Issue.record("no save")
            return
        }
        let token = AccessToken(value: "at-2", expiresAt: at(121), generation: 2)
        #expect(machine.saveFailed("Read-only file system") == .finish(.success(token)))
        #expect(machine.unsaved == record)
        #expect(machine.tokenWanted(now: at(100)) == .use(token))
        #expect(machine.tokenWanted(now: at(130)) == .fail(Machine.storeUnwritable), "expired, and no refresh while the new token is unsaved")
        #expect(machine.timerFired(now: at(130)) == .checkStore(unsaved: record), "the held state is what the retry saves")
        #expect(machine.storeChecked(.writable) == true)
        #expect(machine.unsaved == nil)
        // The store still holds the older record (generation 1): it is not taken back.
        _ = machine.tokenWanted(now: at(131))
        #expect(send(&machine, record: older, now: 131) == "rt-2")
    }

    @Test("a token another instance stored is adopted instead of refreshing, unless it is the one the upstream refused")
    func adoptShared() {
        var machine = machine()
        let origin = RefreshTokenRecord.fingerprint("rt-0")
        let shared = RefreshTokenRecord(refreshToken: "rt-5", origin: origin, accessToken: "at-5", expiresAt: at(600), generation: 5)
        _ = machine.tokenWanted(now: at(0))
        #expect(machine.storeRead(shared, now: at(0)) == .finish(.success(AccessToken(value: "at-5", expiresAt: at(600), generation: 5))))
        #expect(machine.credentials?.refreshToken == "rt-5")
        // The upstream refuses generation 5: the same stored token will not do.
        #expect(machine.upstreamRejected(AccessToken(value: "at-5", expiresAt: at(600), generation: 5), now: at(1)) == .startAndWait)
        #expect(send(&machine, record: shared, now: 1) == "rt-5")
        // Another family's record (an older configured token) is ignored.
        var other = self.machine()
        _ = other.tokenWanted(now: at(0))
        let foreign = RefreshTokenRecord(refreshToken: "rt-x", origin: "elsewhere", accessToken: "at-x", expiresAt: at(600), generation: 9)
        #expect(send(&other, record: foreign) == "rt-0")
    }

    @Test("a saved state loaded at start: its access token is used, and an in-flight mark is reported")
    func loadedAtStart() {
        var machine = machine()
        let origin = RefreshTokenRecord.fingerprint("rt-0")
        let record = RefreshTokenRecord(refreshToken: "rt-3", origin: origin, accessToken: "at-3", expiresAt: at(100), generation: 3, inFlightSince: at(-5))
        #expect(machine.loaded(record, now: at(0)) == at(-5))
        #expect(machine.tokenWanted(now: at(1)) == .use(AccessToken(value: "at-3", expiresAt: at(100), generation: 3)))
        #expect(machine.nextWake(now: at(1)) == at(70))
        var clean = self.machine()
        #expect(clean.loaded(RefreshTokenRecord(refreshToken: "rt-3", origin: origin, generation: 3), now: at(0)) == nil)
        #expect(clean.credentials?.refreshToken == "rt-3")
        #expect(clean.nextWake(now: at(0)) == at(0), "no access token: refresh at once")
    }

    @Test("the proactive schedule follows the newest token, also when a reactive refresh brings one that expires sooner")
    func schedule() {
        var machine = machine(before: .seconds(30))
        _ = machine.tokenWanted(now: at(0))
        _ = send(&machine)
        let first = grant(&machine, "at-1", rotated: "rt-1", expiresIn: 3600)
        #expect(machine.nextWake(now: at(0)) == at(3570))
        _ = machine.upstreamRejected(first!, now: at(10))
        _ = send(&machine, now: 10)
        _ = grant(&machine, "at-2", rotated: "rt-2", expiresIn: 60, now: 10)
        #expect(machine.nextWake(now: at(10)) == at(40))
        #expect(machine.timerFired(now: at(39)) == .none)
        #expect(machine.timerFired(now: at(40)) == .startRefresh)
        // A reload that changes refresh_before_expiry applies to the held token.
        var other = self.machine(before: .seconds(30))
        _ = other.tokenWanted(now: at(0))
        _ = send(&other)
        _ = grant(&other, "at-1", rotated: "rt-1", expiresIn: 3600)
        other.update(.init(refreshBeforeExpiry: .seconds(600), refreshWait: .seconds(300)))
        #expect(other.nextWake(now: at(0)) == at(3000))
    }

    @Test("a token that lives less than refresh_before_expiry is refreshed halfway through its life, not again at once")
    func shortLivedTokens() {
        var machine = machine(before: .seconds(30))
        _ = machine.tokenWanted(now: at(0))
        _ = send(&machine)
        _ = grant(&machine, "at-1", rotated: "rt-1", expiresIn: 10)
        #expect(machine.nextWake(now: at(0)) == at(5))
        #expect(machine.timerFired(now: at(1)) == .none)
        #expect(machine.timerFired(now: at(5)) == .startRefresh)
    }

    @Test("a new configured token waits for the outstanding refresh; a reload resumes only what is stopped")
    func operatorEvents() {
        var machine = machine()
        _ = machine.tokenWanted(now: at(0))
        _ = send(&machine)
        #expect(machine.initialTokenChanged(.init(initial: "rt-new")) == false, "not while a refresh is outstanding")
        #expect(machine.initial.refreshToken == "rt-0")
        #expect(machine.resume() == false)
        _ = grant(&machine, "at-1", rotated: "rt-1")
        #expect(machine.initialTokenChanged(.init(initial: "rt-new")) == true)
        #expect(machine.credentials?.refreshToken == "rt-new")
        #expect(machine.resume() == false, "nothing stopped")
    }
}
