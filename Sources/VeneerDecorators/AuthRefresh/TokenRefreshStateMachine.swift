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
/// - nothing is sent while the token store cannot be written (``State/waitingForStore(reason:)``),
///   and a store that is out of reach never counts as a failure of the endpoint;
/// - a rotated refresh token replaces the one it came from at once, saved or not: nothing
///   ever goes back to a token the endpoint already rotated.
struct TokenRefreshStateMachine {
    /// The options the machine needs; they may change on reload.
    struct Settings: Equatable {
        /// Refresh this long before the access token expires.
        var refreshBeforeExpiry: Duration
        /// How long an answer to a refresh request already sent is awaited.
        var refreshWait: Duration
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
        /// Sent: the endpoint may have it. Its answer is awaited until `deadline`.
        case sent(refreshToken: String, deadline: Date)
        /// Granted (at `grantedAt`): the new state is being saved before anything else happens with it.
        case saving(RefreshTokenRecord, AccessToken, grantedAt: Date)
    }

    /// Where the refreshing stands.
    enum State: Equatable {
        /// Nothing outstanding; a refresh may start.
        case idle
        /// One refresh outstanding.
        case refreshing(Refresh)
        /// The endpoint failed without using the token; the same token is sent again, not before `until`.
        case backingOff(until: Date, error: ProxyError)
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
    /// A granted state whose save failed: saved before any other refresh is sent.
    private(set) var unsaved: RefreshTokenRecord?

    init(initial: Credentials, settings: Settings) {
        self.initial = initial
        self.settings = settings
    }

    /// New options (a reload).
    mutating func update(_ settings: Settings) {
        self.settings = settings
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
        case .backingOff(let until, let error):
            guard now >= until else { return .fail(error) }
            state = .refreshing(Refresh(cause: cause, phase: .reading))
            return .startAndWait
        case .waitingForStore:
            return .fail(Self.storeUnwritable)
        case .stopped(.invalidGrant(let reason)):
            return .fail(Self.unauthorized(reason))
        case .stopped(.outcomeUnknown):
            return .fail(Self.outcomeUnknown)
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
        case .backingOff(let until, _):
            guard now >= until else { return .none }
            // The backoff is over: from here on like idle (the failures still count).
            state = .idle
            return timerFired(now: now)
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
        case .backingOff(let until, _):
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
        return record.inFlightSince
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
                state = .idle
                return .finish(.success(candidate))
            }
        }
        let current = credentials ?? initial
        let marker = RefreshTokenRecord(refreshToken: current.refreshToken, origin: current.origin, accessToken: access?.value,
                                        expiresAt: access?.expiresAt, generation: generation, inFlightSince: now)
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
        refresh.phase = .sent(refreshToken: marker.refreshToken, deadline: now.addingTimeInterval(settings.refreshWait.seconds))
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
        guard case .refreshing(var refresh) = state, case .sent(let presented, _) = refresh.phase else { return .ignore }
        let origin = (credentials ?? initial).origin
        switch result {
        case .granted(let value, let expiresIn, let rotated):
            generation += 1
            let expiresAt = expiresIn.map { now.addingTimeInterval(TimeInterval(max(0, $0))) }
            let token = AccessToken(value: value, expiresAt: expiresAt, generation: generation)
            let next = rotated ?? presented
            // From here on the new token is the one, saved or not: the old one is used up.
            credentials = Credentials(refreshToken: next, origin: origin)
            let record = RefreshTokenRecord(refreshToken: next, origin: origin, accessToken: value, expiresAt: expiresAt, generation: generation)
            refresh.phase = .saving(record, token, grantedAt: now)
            state = .refreshing(refresh)
            return .save(record)
        case .rejected(let reason):
            access = nil
            state = .stopped(.invalidGrant(reason))
            return .finish(.failure(Self.unauthorized(reason)))
        case .failed(let error):
            failures += 1
            // Capped exponential backoff with jitter: 1s, 2s, 4s ... up to 60s.
            let ceiling = min(60.0, pow(2.0, Double(min(failures - 1, 6))))
            state = .backingOff(until: now.addingTimeInterval(ceiling * (0.5 + 0.5 * min(max(jitter, 0), 1))), error: error)
            return .finish(.failure(error))
        case .unknown(let error):
            state = .stopped(.outcomeUnknown(error.message))
            return .finish(.failure(Self.outcomeUnknown))
        }
    }

    /// The granted state is saved.
    mutating func saved() -> FlightAction {
        guard case .refreshing(let refresh) = state, case .saving(_, let token, let grantedAt) = refresh.phase else { return .ignore }
        access = token
        accessIssuedAt = grantedAt
        failures = 0
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
        unsaved = record
        state = .waitingForStore(reason: reason)
        return .finish(.success(token))
    }

    // MARK: Operators

    /// The configured refresh token changed (a new file, or a reload with another token).
    /// Returns false while a refresh is outstanding (the change is taken once it is over).
    mutating func initialTokenChanged(_ new: Credentials) -> Bool {
        guard new.origin != initial.origin else { return false }
        if case .refreshing = state { return false }
        initial = new
        credentials = new
        failures = 0
        // A state saved for the old family is of no use any more.
        unsaved = nil
        switch state {
        case .stopped, .backingOff: state = .idle
        case .idle, .waitingForStore, .refreshing: break
        }
        return true
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
        case .backingOff(_, let error):
            return "token endpoint unavailable: \(error.message) (\(failures) failure\(failures == 1 ? "" : "s"))"
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

    static let outcomeUnknown = ProxyError.upstreamUnavailable(
        "Veneer stopped refreshing its token: a refresh request got no answer, and sending that refresh token again could revoke it; an operator must reload or provide a new refresh token.")

    /// Absorbs a record read from the store: the newest refresh token of the configured
    /// family, whoever rotated it. An older record than what is held is a save that failed
    /// here: never go back to it.
    private mutating func absorb(_ record: RefreshTokenRecord?) {
        if let record, record.origin == initial.origin, credentials == nil || record.generation >= generation {
            credentials = Credentials(refreshToken: record.refreshToken, origin: record.origin)
            generation = max(generation, record.generation)
        } else if credentials == nil || credentials?.origin != initial.origin {
            credentials = initial
        }
    }
}
