import Foundation
import VeneerCore

/// The refresh protocol of one OAuth client (RFC 6749 §6) as a pure value: it holds the
/// newest refresh token, the access token and where the refresh stands, takes events (a
/// caller needs a token, the store was read, the endpoint answered, the store can be written
/// again ...) and answers each with what to do. ``TokenManager`` performs the actions; this
/// type does no I/O, reads no clock (times come with the events) and draws no random number.
///
/// What it guarantees, because no state allows otherwise:
/// - at most one refresh is outstanding; whoever needs a token meanwhile waits for it;
/// - a refresh token that was sent and got no answer is never sent again by itself
///   (``StopReason/outcomeUnknown``); only a failure that proves the endpoint did not use it
///   (an answer without a grant, a request that never reached it) is retried, with backoff;
/// - a refresh that failed that way is sent again when the backoff ends, whoever asked for it
///   and whatever access token is held (the upstream may have refused it);
/// - nothing is sent while the token store cannot be written (``State/waitingForStore(reason:)``),
///   and a store that is out of reach never counts as a failure of the endpoint;
/// - a rotated refresh token replaces the one it came from at once, saved or not: nothing
///   ever goes back to a token the endpoint already rotated;
/// - another token family's record in the store is never overwritten unless
///   ``TokenFamily/admit(_:environment:held:)`` says an operator replaced it;
/// - the in-flight mark is cleared once the endpoint's answer proves the token unused, so that
///   only a stop with a request outstanding leaves one.
struct TokenRefreshStateMachine {
    /// The options the machine needs; they may change on reload.
    struct Settings: Equatable {
        /// Refresh this long before the access token expires.
        var refreshBeforeExpiry: Duration
        /// How long an answer to a refresh request already sent is awaited.
        var refreshWait: Duration
        /// The environment serving ("" for chains built by hand): it joins the owners of the
        /// family it configures.
        var environment = ""
    }

    /// A refresh token and the fingerprint of the configured token its family started from.
    struct Credentials: Equatable {
        var refreshToken: String
        var origin: String

        /// The configured token itself, the start of its family.
        init(initial token: String) {
            refreshToken = token
            origin = RefreshTokenRecord.fingerprint(token)
        }

        init(refreshToken: String, origin: String) {
            self.refreshToken = refreshToken
            self.origin = origin
        }
    }

    /// Why refreshing stopped until an operator acts (a reload, or a new refresh token).
    enum StopReason: Equatable {
        /// The endpoint refused the refresh token (`invalid_grant` and the like).
        case invalidGrant(String)
        /// A refresh request went out and its answer never came: the endpoint may have rotated
        /// the token, and presenting it again would then revoke the whole family.
        case outcomeUnknown(String)
        /// The store holds a token family this one may not overwrite (another instance's, or
        /// one that replaced this one).
        case familyRefused(TokenFamily.Refusal)
    }

    /// Why a refresh started: it decides whether a token another instance stored will do.
    enum Cause: Equatable {
        /// The access token expires soon (or there is none yet); no caller waits.
        case proactive
        /// A caller has no valid access token.
        case needed
        /// The upstream answered 401 to the access token of this generation.
        case rejected(generation: Int)
    }

    /// The one outstanding refresh.
    struct Refresh: Equatable {
        var cause: Cause
        var phase: Phase
    }

    /// How far the outstanding refresh got.
    enum Phase: Equatable {
        /// Holding the store's lock, reading the newest token state.
        case reading
        /// Saving the record that marks its refresh token in flight, before sending it.
        case marking(RefreshTokenRecord)
        /// Sent (the marker says since when): the endpoint may have it. Its answer is awaited until `deadline`.
        case sent(marker: RefreshTokenRecord, deadline: Date)
        /// Granted (at `grantedAt`): the new state is being saved before anything else happens with it.
        case saving(RefreshTokenRecord, AccessToken, grantedAt: Date)
        /// The answer proved the token unused: its in-flight mark is being cleared (this record),
        /// then the refresh ends as `then` says.
        case clearingMark(RefreshTokenRecord, then: Failure)
    }

    /// How a refresh that got no grant ends.
    enum Failure: Equatable {
        /// The endpoint failed without using the token: the same token again after `until`.
        case backOff(until: Date, error: ProxyError, retry: Cause)
        /// Refreshing stops until an operator acts; waiters get `error`.
        case stop(StopReason, error: ProxyError)
    }

    /// Where the refreshing stands.
    enum State: Equatable {
        /// Nothing outstanding; a refresh may start.
        case idle
        /// One refresh outstanding.
        case refreshing(Refresh)
        /// The endpoint failed without using the token; the same token is sent again when
        /// `until` comes, by the loop whatever access token is held (`retry` is why it was wanted).
        case backingOff(until: Date, error: ProxyError, retry: Cause)
        /// The token store cannot be written (or read, for a shared one): nothing is sent until it can.
        case waitingForStore(reason: String)
        /// Nothing is sent until an operator acts.
        case stopped(StopReason)
    }

    /// What a caller without a valid access token does.
    enum CallerAction: Equatable {
        /// Uses this token.
        case use(AccessToken)
        /// Starts a refresh (the performer's job) and waits for it.
        case startAndWait
        /// Waits for the outstanding refresh.
        case wait
        /// Gets this error.
        case fail(ProxyError)
    }

    /// What the background loop does when it wakes.
    enum TimerAction: Equatable {
        /// Nothing is due.
        case none
        /// Starts a refresh (no caller waits for it).
        case startRefresh
        /// Tries the store: saves `unsaved` if there is one, else probes it; then ``storeChecked(_:)``.
        case checkStore(unsaved: RefreshTokenRecord?)
    }

    /// The next step of the outstanding refresh.
    enum FlightAction: Equatable {
        /// Saves this record (the token about to be sent, marked in flight); then
        /// ``markedInFlight(now:)`` or ``markFailed(_:)``.
        case markInFlight(RefreshTokenRecord)
        /// Sends the refresh token; then ``answered(_:now:jitter:)``.
        case send(refreshToken: String)
        /// Saves the granted state, before anything else; then ``saved()`` or ``saveFailed(_:)``.
        case save(RefreshTokenRecord)
        /// Saves this record, the marker without its in-flight mark; then ``markCleared()`` or
        /// ``markClearFailed()``.
        case clearMark(RefreshTokenRecord)
        /// The refresh is over: its waiters get this.
        case finish(Result<AccessToken, ProxyError>)
        /// The event does not belong to the current phase (it cannot happen): nothing to do.
        case ignore
    }

    private(set) var state: State = .idle
    private(set) var settings: Settings
    /// The configured refresh token.
    private(set) var initial: Credentials
    /// The newest refresh token known; nil until the store was read.
    private(set) var credentials: Credentials?
    private(set) var access: AccessToken? {
        didSet { accessIssuedAt = nil }
    }
    /// When the held access token was granted here (nil: adopted from the store), which
    /// tells its lifetime.
    private var accessIssuedAt: Date?
    /// Increases with every new access token, across every instance sharing the store.
    private(set) var generation = 0
    /// Consecutive failures of the endpoint (the backoff grows with them).
    private(set) var failures = 0
    /// The last of those failures (health says it until a refresh succeeds).
    private(set) var lastFailure: ProxyError?
    /// A granted state whose save failed: saved before any other refresh is sent.
    private(set) var unsaved: RefreshTokenRecord?
    /// The environments that configured the held family (nil: not known, for chains built by hand).
    private(set) var owners: [String]?
    /// The families the held one replaced.
    private(set) var retired: [String] = []
    /// The in-flight mark this machine saved last: found in the store, it is no sign of a crash.
    private(set) var ownMark: Date?

    init(initial: Credentials, settings: Settings) {
        self.initial = initial
        self.settings = settings
        owners = settings.environment.isEmpty ? nil : [settings.environment]
    }

    /// New options (a reload), or another environment (a switch) configuring the same family,
    /// which joins its owners.
    mutating func update(_ settings: Settings) {
        self.settings = settings
        if !settings.environment.isEmpty { owners = TokenFamily.appending(settings.environment, to: owners ?? []) }
    }

    /// The family held, as the store would say it.
    var family: TokenFamily { TokenFamily(origin: initial.origin, owners: owners, retired: retired) }

    /// Why the configured refresh token whose SHA-256 is `origin`, in `environment`, may not be
    /// used with what this machine holds and what the store holds (`stored`, nil when empty or
    /// unreadable); nil when it may. Changes nothing: a build that fails later leaves all as it was.
    func refusal(of origin: String, environment: String, stored: RefreshTokenRecord?) -> TokenFamily.Refusal? {
        if case .refused(let refusal) = TokenFamily.admit(origin, environment: environment, held: family) { return refusal }
        guard var held = stored?.family else { return nil }
        if held.origin == initial.origin {
            // What this process knows of the family (a switch not saved yet) counts as saved.
            held.owners = owners.map { TokenFamily.merging(held.owners ?? [], $0) } ?? held.owners
            held.retired = TokenFamily.merging(held.retired, retired)
        }
        if case .refused(let refusal) = TokenFamily.admit(origin, environment: environment, held: held) { return refusal }
        return nil
    }

    // MARK: Callers

    /// A caller needs a token and holds none that is valid at `now`.
    mutating func tokenWanted(now: Date) -> CallerAction {
        if let access, Self.isValid(access, at: now) { return .use(access) }
        return refreshNeeded(.needed, now: now)
    }

    /// The upstream answered 401 to `seen`.
    mutating func upstreamRejected(_ seen: AccessToken, now: Date) -> CallerAction {
        if let access, access.generation > seen.generation, Self.isValid(access, at: now) { return .use(access) }
        return refreshNeeded(.rejected(generation: seen.generation), now: now)
    }

    private mutating func refreshNeeded(_ cause: Cause, now: Date) -> CallerAction {
        switch state {
        case .idle:
            state = .refreshing(Refresh(cause: cause, phase: .reading))
            return .startAndWait
        case .refreshing(var refresh):
            // Never a second request: join this one. A 401 seen before the store is read
            // keeps a stored token of that generation from being adopted.
            if case .rejected = cause, case .reading = refresh.phase {
                refresh.cause = cause
                state = .refreshing(refresh)
            }
            return .wait
        case .backingOff(let until, let error, _):
            guard now >= until else { return .fail(error) }
            state = .refreshing(Refresh(cause: cause, phase: .reading))
            return .startAndWait
        case .waitingForStore:
            return .fail(Self.storeUnwritable)
        case .stopped(.invalidGrant(let reason)):
            return .fail(Self.unauthorized(reason))
        case .stopped(.outcomeUnknown):
            return .fail(Self.outcomeUnknown)
        case .stopped(.familyRefused):
            return .fail(Self.familyRefused)
        }
    }

    // MARK: The background loop

    /// The loop woke at `now`.
    mutating func timerFired(now: Date) -> TimerAction {
        switch state {
        case .idle:
            guard isDue(now: now) else { return .none }
            state = .refreshing(Refresh(cause: .proactive, phase: .reading))
            return .startRefresh
        case .backingOff(let until, _, let retry):
            guard now >= until else { return .none }
            // The backoff is over: the refresh that failed is owed, whatever access token is
            // held (after a 401 the upstream refuses it although it has not expired).
            state = .refreshing(Refresh(cause: retry, phase: .reading))
            return .startRefresh
        case .waitingForStore:
            return .checkStore(unsaved: unsaved)
        case .refreshing, .stopped:
            return .none
        }
    }

    /// When the loop must wake next without being told; nil: only when told.
    func nextWake(now: Date) -> Date? {
        switch state {
        case .idle:
            guard access != nil else { return now }
            return refreshDue
        case .backingOff(let until, _, _):
            return until
        case .waitingForStore:
            return now.addingTimeInterval(Self.storeRetryInterval.seconds)
        case .refreshing, .stopped:
            return nil
        }
    }

    /// How often an unwritable store is tried again. Fixed: a store's trouble is not the
    /// endpoint's, so it never grows the endpoint's backoff.
    static let storeRetryInterval: Duration = .seconds(1)

    private func isDue(now: Date) -> Bool {
        guard access != nil else { return true }
        guard let refreshDue else { return false }
        return now >= refreshDue
    }

    /// When the held access token is refreshed ahead of its expiry: `refresh_before_expiry`
    /// ahead, but never earlier than halfway through its lifetime, so that an endpoint that
    /// issues tokens shorter than `refresh_before_expiry` is not asked again at once, forever.
    private var refreshDue: Date? {
        guard let expiresAt = access?.expiresAt else { return nil }
        var lead = settings.refreshBeforeExpiry.seconds
        if let accessIssuedAt { lead = min(lead, expiresAt.timeIntervalSince(accessIssuedAt) / 2) }
        return expiresAt.addingTimeInterval(-lead)
    }

    // MARK: The store

    /// The saved state was read at start (no lock, nothing outstanding). Returns when the
    /// saved refresh token was marked in flight: Veneer stopped while the endpoint may have
    /// rotated it.
    mutating func loaded(_ record: RefreshTokenRecord?, now: Date) -> Date? {
        absorb(record)
        guard let record, record.origin == initial.origin, record.generation >= generation else { return nil }
        if let value = record.accessToken {
            let saved = AccessToken(value: value, expiresAt: record.expiresAt, generation: record.generation)
            if Self.isValid(saved, at: now) { access = saved }
        }
        return leftByAStop(record)
    }

    /// When `record` (of this family) was marked in flight by a refresh whose outcome nobody
    /// learnt: an instance stopped (or crashed) with it outstanding. Not this machine's own
    /// mark, whose outcome it knows.
    func leftByAStop(_ record: RefreshTokenRecord) -> Date? {
        guard record.origin == initial.origin, let since = record.inFlightSince, since != ownMark else { return nil }
        return since
    }

    /// The store was probed (or the unsaved state saved) while waiting for it, or at start.
    /// Returns true when refreshing may go on.
    mutating func storeChecked(_ probe: TokenStoreProbe) -> Bool {
        switch (state, probe) {
        case (.waitingForStore, .writable):
            unsaved = nil
            state = .idle
            return true
        case (.waitingForStore, .unwritable(let reason, _)), (.idle, .unwritable(let reason, _)), (.backingOff, .unwritable(let reason, _)):
            state = .waitingForStore(reason: reason)
            return false
        default:
            return false
        }
    }

    /// A shared store says it is reachable again: try it at once rather than at the next retry.
    func storeMayBeBack() -> TimerAction {
        guard case .waitingForStore = state else { return .none }
        return .checkStore(unsaved: unsaved)
    }

    // MARK: The outstanding refresh

    /// Under the store's lock, the newest saved state was read.
    mutating func storeRead(_ record: RefreshTokenRecord?, now: Date) -> FlightAction {
        guard case .refreshing(var refresh) = state, refresh.phase == .reading else { return .ignore }
        switch TokenFamily.admit(initial.origin, environment: settings.environment, held: record?.family) {
        case .refused(let refusal):
            // Another instance's family, or one that replaced this one, since the chain was
            // built: its record stays as it is, and nothing is sent.
            state = .stopped(.familyRefused(refusal))
            return .finish(.failure(Self.familyRefused))
        case .replaces(let old):
            retired = TokenFamily.merging(record?.retired ?? [], TokenFamily.appending(old, to: retired))
        case .fresh, .same:
            break
        }
        absorb(record)
        if let record, record.origin == initial.origin, record.generation >= generation, let value = record.accessToken {
            // Another instance (or an earlier life of this one) already refreshed: its token
            // will do unless it is the one the upstream refused, or expires too soon.
            var newerThan = access?.generation ?? 0
            var rejected = false
            if case .rejected(let seen) = refresh.cause {
                newerThan = seen
                rejected = true
            }
            let candidate = AccessToken(value: value, expiresAt: record.expiresAt, generation: record.generation)
            let fresh = Self.isValid(candidate, at: now.addingTimeInterval(settings.refreshBeforeExpiry.seconds))
            if record.generation > newerThan, fresh || (rejected && Self.isValid(candidate, at: now)) {
                access = candidate
                failures = 0
                lastFailure = nil
                state = .idle
                return .finish(.success(candidate))
            }
        }
        let current = credentials ?? initial
        let marker = RefreshTokenRecord(refreshToken: current.refreshToken, origin: current.origin, accessToken: access?.value,
                                        expiresAt: access?.expiresAt, generation: generation, inFlightSince: now,
                                        owners: owners, retired: retired)
        refresh.phase = .marking(marker)
        state = .refreshing(refresh)
        return .markInFlight(marker)
    }

    /// Taking the lock or reading the store failed: nothing was sent.
    mutating func storeUnavailable(_ reason: String) -> FlightAction {
        guard case .refreshing(let refresh) = state, refresh.phase == .reading else { return .ignore }
        state = .waitingForStore(reason: reason)
        return .finish(.failure(Self.storeUnwritable))
    }

    /// The in-flight marker is saved: the token may go out.
    mutating func markedInFlight(now: Date) -> FlightAction {
        guard case .refreshing(var refresh) = state, case .marking(let marker) = refresh.phase else { return .ignore }
        ownMark = marker.inFlightSince
        refresh.phase = .sent(marker: marker, deadline: now.addingTimeInterval(settings.refreshWait.seconds))
        state = .refreshing(refresh)
        return .send(refreshToken: marker.refreshToken)
    }

    /// The in-flight marker could not be saved: the store cannot be written, so nothing is sent.
    mutating func markFailed(_ reason: String) -> FlightAction {
        guard case .refreshing(let refresh) = state, case .marking = refresh.phase else { return .ignore }
        state = .waitingForStore(reason: reason)
        return .finish(.failure(Self.storeUnwritable))
    }

    /// What came of the request. `jitter` (0...1) spreads the backoff.
    mutating func answered(_ result: TokenGrantResult, now: Date, jitter: Double) -> FlightAction {
        guard case .refreshing(var refresh) = state, case .sent(let marker, _) = refresh.phase else { return .ignore }
        let origin = (credentials ?? initial).origin
        var unmarked = marker
        unmarked.inFlightSince = nil
        switch result {
        case .granted(let value, let expiresIn, let rotated):
            generation += 1
            let expiresAt = expiresIn.map { now.addingTimeInterval(TimeInterval(max(0, $0))) }
            let token = AccessToken(value: value, expiresAt: expiresAt, generation: generation)
            let next = rotated ?? marker.refreshToken
            // From here on the new token is the one, saved or not: the old one is used up.
            credentials = Credentials(refreshToken: next, origin: origin)
            let record = RefreshTokenRecord(refreshToken: next, origin: origin, accessToken: value, expiresAt: expiresAt, generation: generation,
                                            owners: owners, retired: retired)
            refresh.phase = .saving(record, token, grantedAt: now)
            state = .refreshing(refresh)
            return .save(record)
        case .rejected(let reason):
            // Refused, so not rotated: the mark goes, or the next start would speak of a crash.
            access = nil
            refresh.phase = .clearingMark(unmarked, then: .stop(.invalidGrant(reason), error: Self.unauthorized(reason)))
            state = .refreshing(refresh)
            return .clearMark(unmarked)
        case .failed(let error):
            failures += 1
            lastFailure = error
            // Capped exponential backoff with jitter: 1s, 2s, 4s ... up to 60s.
            let ceiling = min(60.0, pow(2.0, Double(min(failures - 1, 6))))
            let until = now.addingTimeInterval(ceiling * (0.5 + 0.5 * min(max(jitter, 0), 1)))
            refresh.phase = .clearingMark(unmarked, then: .backOff(until: until, error: error, retry: refresh.cause))
            state = .refreshing(refresh)
            return .clearMark(unmarked)
        case .unknown(let error):
            // The mark stays: the endpoint may have rotated the token.
            state = .stopped(.outcomeUnknown(error.message))
            return .finish(.failure(Self.outcomeUnknown))
        }
    }

    /// The in-flight mark is cleared.
    mutating func markCleared() -> FlightAction {
        guard case .refreshing(let refresh) = state, case .clearingMark(_, let then) = refresh.phase else { return .ignore }
        return end(then)
    }

    /// The in-flight mark could not be cleared (the store cannot be written): the refresh ends
    /// the same way. The mark left is this machine's own (``ownMark``), no sign of a crash, and
    /// the next refresh tries the store before it sends anything.
    mutating func markClearFailed() -> FlightAction {
        guard case .refreshing(let refresh) = state, case .clearingMark(_, let then) = refresh.phase else { return .ignore }
        return end(then)
    }

    private mutating func end(_ failure: Failure) -> FlightAction {
        switch failure {
        case .backOff(let until, let error, let retry):
            state = .backingOff(until: until, error: error, retry: retry)
            return .finish(.failure(error))
        case .stop(let reason, let error):
            state = .stopped(reason)
            return .finish(.failure(error))
        }
    }

    /// The granted state is saved.
    mutating func saved() -> FlightAction {
        guard case .refreshing(let refresh) = state, case .saving(_, let token, let grantedAt) = refresh.phase else { return .ignore }
        access = token
        accessIssuedAt = grantedAt
        failures = 0
        lastFailure = nil
        state = .idle
        return .finish(.success(token))
    }

    /// The granted state could not be saved: the access token is used, the new refresh token
    /// is held in memory, and nothing more is sent until it is saved.
    mutating func saveFailed(_ reason: String) -> FlightAction {
        guard case .refreshing(let refresh) = state, case .saving(let record, let token, let grantedAt) = refresh.phase else { return .ignore }
        access = token
        accessIssuedAt = grantedAt
        failures = 0
        lastFailure = nil
        unsaved = record
        state = .waitingForStore(reason: reason)
        return .finish(.success(token))
    }

    // MARK: Operators

    /// What came of a changed configured refresh token.
    enum TokenChange: Equatable {
        /// It is the one held.
        case unchanged
        /// A refresh is outstanding: the change is taken once it is over.
        case deferred
        /// It replaces the held family.
        case taken
        /// It may not be taken (``TokenFamily/admit(_:environment:held:)``): the held one stays.
        case refused(TokenFamily.Refusal)
    }

    /// The configured refresh token changed (a new file, or a reload with another token): the
    /// operator of the environment serving replaces the family, unless the new token's family
    /// was itself replaced before.
    mutating func initialTokenChanged(_ new: Credentials) -> TokenChange {
        guard new.origin != initial.origin else { return .unchanged }
        if case .refreshing = state { return .deferred }
        switch TokenFamily.admit(new.origin, environment: settings.environment, held: family) {
        case .refused(let refusal): return .refused(refusal)
        case .replaces(let old): retired = TokenFamily.appending(old, to: retired)
        case .fresh, .same: break
        }
        owners = settings.environment.isEmpty ? nil : [settings.environment]
        initial = new
        credentials = new
        failures = 0
        lastFailure = nil
        // A state saved for the old family is of no use any more.
        unsaved = nil
        switch state {
        case .stopped, .backingOff: state = .idle
        case .idle, .waitingForStore, .refreshing: break
        }
        return .taken
    }

    /// A reload: a stopped refresh starts again, with the token it holds. Returns true when it did.
    mutating func resume() -> Bool {
        guard case .stopped = state else { return false }
        state = .idle
        return true
    }

    // MARK: What it says

    /// Why the refreshing is degraded (health), if it is; the store's trouble is ``storageProblem``.
    var problem: String? {
        switch state {
        case .backingOff(let until, let error, _):
            return "token endpoint unavailable: \(error.message) (\(failures) failure\(failures == 1 ? "" : "s")); "
                + "the same refresh token is sent again at \(Timestamp.iso8601(until))"
        case .refreshing where failures > 0:
            let error = lastFailure?.message ?? "it failed"
            return "token endpoint unavailable: \(error) (\(failures) failure\(failures == 1 ? "" : "s")); trying again now"
        case .stopped(.familyRefused(let refusal)):
            return "refreshing stopped: " + refusal.explanation(store: nil)
        case .stopped(.invalidGrant(let reason)):
            return "\(reason); refreshing stopped until the refresh token changes or the configuration is reloaded"
        case .stopped(.outcomeUnknown(let reason)):
            return "refresh outcome unknown: \(reason) The refresh token is not sent again until the configuration is reloaded or a new refresh token is provided."
        case .idle, .refreshing, .waitingForStore:
            return nil
        }
    }

    /// Why the token store holds up refreshing, if it does.
    var storageProblem: String? {
        guard case .waitingForStore(let reason) = state else { return nil }
        let held = unsaved == nil ? "" : "; the newest refresh token is held in memory only"
        return "the token store cannot be written (\(reason)); no refresh is sent until it can\(held)"
    }

    static func isValid(_ token: AccessToken, at date: Date) -> Bool {
        guard let expiresAt = token.expiresAt else { return true }
        return date < expiresAt
    }

    static func unauthorized(_ reason: String) -> ProxyError {
        ProxyError(.unauthorized, "Veneer's credentials for the upstream were refused (\(reason)); an operator must provide a new refresh token.")
    }

    static let storeUnwritable = ProxyError.upstreamUnavailable(
        "Veneer cannot refresh its token now: its token store cannot be written, and a new refresh token that cannot be saved would be lost.")

    static let familyRefused = ProxyError.upstreamUnavailable(
        "Veneer stopped refreshing its token: its token store holds another token family, which it must not overwrite; an operator must act (see /-/health).")

    static let outcomeUnknown = ProxyError.upstreamUnavailable(
        "Veneer stopped refreshing its token: a refresh request got no answer, and sending that refresh token again could revoke it; an operator must reload or provide a new refresh token.")

    /// Absorbs a record read from the store: the newest refresh token of the configured
    /// family, whoever rotated it. An older record than what is held is a save that failed
    /// here: never go back to it.
    private mutating func absorb(_ record: RefreshTokenRecord?) {
        if let record, record.origin == initial.origin {
            // Whoever saved it (another environment configuring the same token, another
            // instance) knows the family too.
            if let saved = record.owners { owners = TokenFamily.merging(saved, owners ?? []) }
            retired = TokenFamily.merging(record.retired, retired)
        }
        if let record, record.origin == initial.origin, credentials == nil || record.generation >= generation {
            credentials = Credentials(refreshToken: record.refreshToken, origin: record.origin)
            generation = max(generation, record.generation)
        } else if credentials == nil || credentials?.origin != initial.origin {
            credentials = initial
        }
    }
}
