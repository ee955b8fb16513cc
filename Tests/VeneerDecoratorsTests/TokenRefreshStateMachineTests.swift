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

    /// A failure that proves the token unused, its in-flight mark cleared.
    func fail(_ machine: inout Machine, _ error: ProxyError, now: Double, jitter: Double = 0) -> Machine.FlightAction {
        guard case .clearMark(let record) = machine.answered(.failed(error), now: at(now), jitter: jitter) else { return .ignore }
        #expect(record.inFlightSince == nil)
        return machine.markCleared()
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
        #expect(fail(&machine, unavailable, now: 0) == .finish(.failure(unavailable)))
        #expect(machine.state == .backingOff(until: at(0.5), error: unavailable, retry: .needed))
        #expect(machine.tokenWanted(now: at(0.4)) == .fail(unavailable), "callers get the error at once while backing off")
        #expect(machine.nextWake(now: at(0.1)) == at(0.5))
        #expect(machine.tokenWanted(now: at(0.5)) == .startAndWait)
        #expect(send(&machine, now: 0.5) == "rt-0", "the same token: the endpoint did not take it")
        // The backoff doubles (full jitter here) up to a minute.
        var now = 0.5
        var ceilings: [Double] = []
        for _ in 0..<8 {
            _ = fail(&machine, unavailable.neverSent, now: now, jitter: 1)
            guard case .backingOff(let until, _, _) = machine.state else { Issue.record("not backing off"); return }
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
        guard case .clearMark(let unmarked) = machine.answered(.rejected(reason: "refresh token rejected (invalid_grant)"), now: at(0), jitter: 0) else {
            Issue.record("the mark of a refused token is not cleared")
            return
        }
        #expect(unmarked.refreshToken == "rt-0" && unmarked.inFlightSince == nil, "refused, so not rotated: no crash to report later")
        #expect(machine.markCleared() == .finish(.failure(Machine.unauthorized("refresh token rejected (invalid_grant)"))))
        #expect(machine.access == nil)
        #expect(machine.tokenWanted(now: at(1)) == .fail(Machine.unauthorized("refresh token rejected (invalid_grant)")))
        #expect(machine.timerFired(now: at(100)) == .none)
        #expect(machine.initialTokenChanged(.init(initial: "rt-0")) == .unchanged, "the same token is no change")
        #expect(machine.initialTokenChanged(.init(initial: "rt-new")) == .taken)
        #expect(machine.state == .idle)
        #expect(machine.timerFired(now: at(101)) == .startRefresh)
        #expect(send(&machine, now: 101) == "rt-new")
    }

    @Test("outcome unknown, then a new token file: the next refresh sends the new token although the store still holds the old one marked in flight, and its grant serves")
    func newTokenAfterOutcomeUnknown() throws {
        // As AuthRefreshFamilyTests' refreshWaitEnds drives the binary (whose flaky end this rules out).
        var machine = Machine(initial: .init(initial: "rt-0"),
                              settings: .init(refreshBeforeExpiry: .seconds(30), refreshWait: .seconds(2), environment: "development"))
        #expect(machine.tokenWanted(now: at(0)) == .startAndWait)
        guard case .markInFlight(let marker) = machine.storeRead(nil, now: at(0)) else {
            Issue.record("no marker")
            return
        }
        #expect(machine.markedInFlight(now: at(0)) == .send(refreshToken: "rt-0"))
        #expect(machine.answered(.unknown(noAnswer), now: at(2), jitter: 0) == .finish(.failure(Machine.outcomeUnknown)))
        #expect(machine.tokenWanted(now: at(3)) == .fail(Machine.outcomeUnknown))
        #expect(machine.initialTokenChanged(.init(initial: "rt-new")) == .taken)
        #expect(machine.problem == nil)
        #expect(machine.timerFired(now: at(4)) == .startRefresh)
        #expect(machine.tokenWanted(now: at(4)) == .wait, "a caller meanwhile waits for that refresh")
        // The store still holds rt-0 marked in flight: the mark of a family the new token replaces.
        #expect(send(&machine, record: marker, now: 4) == "rt-new")
        let token = try #require(grant(&machine, "at-new", rotated: "rt-new-2", now: 5))
        #expect(machine.tokenWanted(now: at(6)) == .use(token))
        #expect(machine.credentials?.refreshToken == "rt-new-2")
        #expect(machine.retired == [marker.origin], "the old family is retired, not overwritten by itself later")
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
        #expect(machine.initialTokenChanged(.init(initial: "rt-new")) == .deferred, "not while a refresh is outstanding")
        #expect(machine.initial.refreshToken == "rt-0")
        #expect(machine.resume() == false)
        _ = grant(&machine, "at-1", rotated: "rt-1")
        #expect(machine.initialTokenChanged(.init(initial: "rt-new")) == .taken)
        #expect(machine.credentials?.refreshToken == "rt-new")
        #expect(machine.resume() == false, "nothing stopped")
    }

    // MARK: A failure of the endpoint is retried by itself (issue 32)

    @Test("a 5xx after the upstream's 401: when the backoff ends the refresh is sent again by itself, although the held access token has not expired")
    func backoffEndsInARetry() throws {
        var machine = machine()
        _ = machine.tokenWanted(now: at(0))
        _ = send(&machine)
        let first = try #require(grant(&machine, "at-1", rotated: "rt-1", expiresIn: 600))
        #expect(machine.upstreamRejected(first, now: at(10)) == .startAndWait)
        #expect(send(&machine, now: 10) == "rt-1")
        #expect(fail(&machine, unavailable, now: 10) == .finish(.failure(unavailable)))
        #expect(machine.state == .backingOff(until: at(10.5), error: unavailable, retry: .rejected(generation: 1)))
        #expect(machine.problem?.hasPrefix("token endpoint unavailable") == true)
        #expect(machine.upstreamRejected(first, now: at(10.2)) == .fail(unavailable), "callers get the error at once while backing off")
        #expect(machine.nextWake(now: at(10.2)) == at(10.5))
        #expect(machine.timerFired(now: at(10.4)) == .none)
        #expect(machine.timerFired(now: at(10.5)) == .startRefresh, "owed: the upstream refused the access token still held")
        #expect(machine.problem?.contains("trying again now") == true, "health keeps the failure until a refresh succeeds")
        #expect(machine.upstreamRejected(first, now: at(10.5)) == .wait)
        let refused = RefreshTokenRecord(refreshToken: "rt-1", origin: RefreshTokenRecord.fingerprint("rt-0"), accessToken: "at-1",
                                         expiresAt: at(600), generation: 1)
        #expect(send(&machine, record: refused, now: 10.5) == "rt-1", "the refused access token is not adopted back from the store")
        _ = grant(&machine, "at-2", rotated: "rt-2", expiresIn: 600, now: 10.5)
        #expect(machine.problem == nil, "healthy again once a refresh succeeds")
        #expect(machine.failures == 0 && machine.lastFailure == nil)
    }

    @Test("the in-flight mark is cleared when the answer proves the token unused; this machine's own mark is no sign of a stop, another one is")
    func inFlightMarks() {
        var machine = machine()
        _ = machine.tokenWanted(now: at(0))
        guard case .markInFlight(let marker) = machine.storeRead(nil, now: at(0)), case .send = machine.markedInFlight(now: at(0)) else {
            Issue.record("not sent")
            return
        }
        var unmarked = marker
        unmarked.inFlightSince = nil
        #expect(machine.answered(.failed(unavailable), now: at(1), jitter: 0) == .clearMark(unmarked))
        #expect(machine.tokenWanted(now: at(1)) == .wait, "the refresh is not over until its mark is cleared")
        #expect(machine.timerFired(now: at(5)) == .none)
        #expect(machine.markClearFailed() == .finish(.failure(unavailable)), "a mark that cannot be cleared changes nothing else")
        #expect(machine.state == .backingOff(until: at(1.5), error: unavailable, retry: .needed))
        #expect(machine.markCleared() == .ignore)
        #expect(machine.leftByAStop(marker) == nil, "the mark this machine left: it knows that request's outcome")
        var crashed = marker
        crashed.inFlightSince = at(-100)
        #expect(machine.leftByAStop(crashed) == at(-100), "a mark of another life (or instance) is reported")
        // No answer: the mark stays, since the endpoint may have rotated the token.
        #expect(machine.tokenWanted(now: at(2)) == .startAndWait)
        #expect(send(&machine, now: 2) == "rt-0")
        #expect(machine.answered(.unknown(noAnswer), now: at(300), jitter: 0) == .finish(.failure(Machine.outcomeUnknown)))
        var restarted = self.machine()
        #expect(restarted.loaded(marker, now: at(400)) == at(0), "a restart reports a mark it finds")
    }

    // MARK: Token families (issue 25)

    func machine(_ environment: String, token: String) -> Machine {
        Machine(initial: .init(initial: token), settings: .init(refreshBeforeExpiry: .seconds(30), refreshWait: .seconds(300), environment: environment))
    }

    func fingerprint(_ token: String) -> String { RefreshTokenRecord.fingerprint(token) }

    @Test("the family rule: the holder's environment replaces its family, another environment is refused, a replaced family never comes back")
    func familyRule() {
        let held = TokenFamily(origin: "A", owners: ["fa"], retired: ["old"])
        #expect(TokenFamily.admit("A", environment: "fb", held: nil) == .fresh)
        #expect(TokenFamily.admit("A", environment: "fb", held: held) == .same, "the same refresh token in another environment: one grant")
        #expect(TokenFamily.admit("B", environment: "fa", held: held) == .replaces("A"), "fa's operator provides a new refresh token")
        #expect(TokenFamily.admit("B", environment: "fb", held: held) == .refused(.heldByOthers(["fa"])))
        #expect(TokenFamily.admit("old", environment: "fa", held: held) == .refused(.retired))
        #expect(TokenFamily.admit("B", environment: "fb", held: TokenFamily(origin: "A", owners: nil)) == .replaces("A"),
                "a record saved before owners were kept: as before")
        #expect(TokenFamily.appending("x", to: (0..<40).map(String.init)).count == TokenFamily.memory)
        #expect(TokenFamily.merging(["a", "b"], ["b", "c"]) == ["a", "b", "c"])
        let record = RefreshTokenRecord(refreshToken: "rt", origin: "A", generation: 2, owners: ["fa", "fa2"], retired: ["old"])
        #expect(RefreshTokenRecord(decoding: record.encoded) == record, "owners and retired families are saved with the token")
    }

    @Test("fa → fn → fb → fn → fa: the store keeps fa's family, so fb is refused by it, and would stop rather than overwrite it; fa goes on with its newest token")
    func familyThroughAnIntermediateEnvironment() {
        var a = machine("fa", token: "rt-a")
        _ = a.tokenWanted(now: at(0))
        #expect(send(&a) == "rt-a")
        guard case .save(let saved) = a.answered(.granted(accessToken: "at-1", expiresIn: 60, refreshToken: "rt-a1"), now: at(0), jitter: 0) else {
            Issue.record("no save")
            return
        }
        #expect(saved.owners == ["fa"] && saved.origin == fingerprint("rt-a"))
        _ = a.saved()
        // fn serves: fa's manager is gone. fb's chain makes a new one over the same store.
        let b = machine("fb", token: "rt-b")
        #expect(b.refusal(of: fingerprint("rt-b"), environment: "fb", stored: saved) == .heldByOthers(["fa"]))
        // Had its chain been built anyway, fb's refresh would stop without a write.
        var forced = machine("fb", token: "rt-b")
        _ = forced.loaded(saved, now: at(1))
        _ = forced.tokenWanted(now: at(1))
        #expect(forced.storeRead(saved, now: at(1)) == .finish(.failure(Machine.familyRefused)))
        #expect(forced.state == .stopped(.familyRefused(.heldByOthers(["fa"]))))
        #expect(forced.problem?.contains("environment fa") == true)
        #expect(forced.tokenWanted(now: at(2)) == .fail(Machine.familyRefused))
        // Back on fa: a new manager, admitted, continues from the saved rotation.
        var again = machine("fa", token: "rt-a")
        #expect(again.refusal(of: fingerprint("rt-a"), environment: "fa", stored: saved) == nil)
        _ = again.loaded(saved, now: at(2))
        _ = again.tokenWanted(now: at(120))
        #expect(send(&again, record: saved, now: 120) == "rt-a1")
    }

    @Test("a switch keeps the manager: another environment's token is refused by what it holds, saved or not; the same token joins the owners, whose operator may replace it")
    func familyOfAKeptManager() {
        var a = machine("fa", token: "rt-a")
        #expect(a.refusal(of: fingerprint("rt-b"), environment: "fb", stored: nil) == .heldByOthers(["fa"]), "nothing saved yet")
        #expect(a.refusal(of: fingerprint("rt-a"), environment: "fa2", stored: nil) == nil, "the same grant")
        a.update(.init(refreshBeforeExpiry: .seconds(30), refreshWait: .seconds(300), environment: "fa2"))
        #expect(a.owners == ["fa", "fa2"])
        // The store still names fa alone (nothing saved since the switch): what the manager knows counts.
        let stored = RefreshTokenRecord(refreshToken: "rt-a3", origin: fingerprint("rt-a"), generation: 3, owners: ["fa"])
        #expect(a.refusal(of: fingerprint("rt-a2"), environment: "fa2", stored: stored) == nil, "fa2's operator replaces the token")
        #expect(a.initialTokenChanged(.init(initial: "rt-a2")) == .taken)
        #expect(a.retired == [fingerprint("rt-a")] && a.owners == ["fa2"])
        // fa still configures the replaced token: refused from now on, and a file bringing it back is not taken.
        #expect(a.refusal(of: fingerprint("rt-a"), environment: "fa", stored: nil) == .retired)
        #expect(a.initialTokenChanged(.init(initial: "rt-a")) == .refused(.retired))
        #expect(a.initial.refreshToken == "rt-a2")
    }

    @Test("an operator's new token takes the store over and retires the old family: an instance still configuring that one stops, and is refused at its next start")
    func familyReplacedInTheStore() {
        let old = RefreshTokenRecord(refreshToken: "rt-a5", origin: fingerprint("rt-a"), generation: 5, owners: ["fa"])
        var replacing = machine("fa", token: "rt-a2")
        #expect(replacing.refusal(of: fingerprint("rt-a2"), environment: "fa", stored: old) == nil)
        _ = replacing.loaded(old, now: at(0))
        _ = replacing.tokenWanted(now: at(0))
        guard case .markInFlight(let marker) = replacing.storeRead(old, now: at(0)) else {
            Issue.record("not marked")
            return
        }
        #expect(marker.refreshToken == "rt-a2" && marker.origin == fingerprint("rt-a2"))
        #expect(marker.retired == [fingerprint("rt-a")] && marker.owners == ["fa"])
        // A second instance sharing the store, still on rt-a, reads the new record under the lock.
        var stale = machine("fa", token: "rt-a")
        _ = stale.loaded(old, now: at(0))
        _ = stale.tokenWanted(now: at(1))
        #expect(stale.storeRead(marker, now: at(1)) == .finish(.failure(Machine.familyRefused)), "nothing overwritten, nothing sent")
        #expect(stale.state == .stopped(.familyRefused(.retired)))
        #expect(machine("fa", token: "rt-a").refusal(of: fingerprint("rt-a"), environment: "fa", stored: marker) == .retired)
    }
}
