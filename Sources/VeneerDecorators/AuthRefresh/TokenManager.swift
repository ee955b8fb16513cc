import CoreMetrics
import Foundation
import Logging
import VeneerConfig
import VeneerCore

/// The one token manager of a client (token endpoint, client id and store): it performs
/// what ``TokenRefreshStateMachine`` decides, and nothing else. It hands out the access token,
/// refreshes it before expiry and after a 401 (one refresh at a time, whoever asks), saves a
/// rotated refresh token before anything else happens with it, and runs the loop that
/// refreshes ahead of expiry, retries an unwritable store and watches the refresh token file.
///
/// A refresh runs in a task of its own: a caller that gives up at `timeout` (504), or goes
/// away, does not take the request with it. Its answer is awaited for `refresh_wait`,
/// because it may carry the only valid refresh token.
actor TokenManager: CarriedService {
    private(set) var options: AuthRefreshOptions
    private var endpoint: TokenEndpoint
    let store: any RefreshTokenStore
    let clock: any VeneerClock
    let health: HealthBoard
    let logger: Logger
    let healthName: String
    let metrics: AuthRefreshMetrics

    private(set) var machine: TokenRefreshStateMachine
    /// The refresh under way and its waiters.
    private var flight: RefreshFlight?
    /// Set when a caller gave up on the refresh under way (health says it is slow).
    private var slowSince: Date?
    private let wakeup = Wakeup()
    /// Refresh requests sent to the endpoint (for metrics and tests).
    private(set) var refreshCount = 0
    /// A configured refresh token that may not be taken (its SHA-256, and why): said once in
    /// the log and in health until the configuration changes.
    private var refusedToken: (origin: String, reason: String)?
    /// Where a refresh no request started (ahead of expiry) sends its trace (`telemetry`).
    let spans: (any SpanSink)?

    init(options: AuthRefreshOptions, initialToken: String, endpoint: TokenEndpoint, store: any RefreshTokenStore, clock: any VeneerClock,
         health: HealthBoard, logger: Logger, metrics: any MetricsFactory = NOOPMetricsHandler.instance, environment: String = "",
         spans: (any SpanSink)? = nil) {
        self.options = options
        self.spans = spans
        self.endpoint = endpoint
        self.store = store
        self.clock = clock
        self.health = health
        self.logger = logger
        self.healthName = "auth_refresh \(options.tokenEndpoint.authority)"
        self.metrics = AuthRefreshMetrics(endpoint: options.tokenEndpoint.authority, factory: metrics)
        machine = TokenRefreshStateMachine(initial: .init(initial: initialToken), settings: Self.settings(options, environment: environment))
    }

    static func settings(_ options: AuthRefreshOptions, environment: String) -> TokenRefreshStateMachine.Settings {
        .init(refreshBeforeExpiry: options.refreshBeforeExpiry, refreshWait: options.refreshWait, environment: environment)
    }

    // MARK: Start and reload

    /// Once, before the manager is first used: removes temporary files a crash left (unread),
    /// probes that the store can be written, and reads the saved state. Returns the probe, so
    /// that a store that cannot be written at all stops the start.
    func prepare() async -> TokenStoreProbe {
        let removed = store.removeLeftovers()
        if removed > 0 {
            logger.warning("removed temporary token files left by an interrupted save, without reading them", metadata: ["files": .stringConvertible(removed)])
        }
        let probe = await store.probe()
        if case .unwritable(let reason, _) = probe {
            _ = machine.storeChecked(probe)
            logger.error("the token store cannot be written; no refresh is sent until it can", metadata: ["reason": .string(reason)])
        }
        do {
            let record = try await store.load()
            if let since = machine.loaded(record, now: clock.now()), let record {
                logInFlight(record, since: since, when: "at start")
            }
        } catch {
            // Refreshing reads the store again (and sends nothing while it cannot).
            logger.warning("the saved token state cannot be read now", metadata: ["error": .string(Self.describe(error))])
        }
        publishHealth()
        return probe
    }

    /// Why a chain that configures `token` in `environment` may not use this manager (whose
    /// family it would overwrite, see ``TokenFamily``), checked against what the manager holds
    /// and what the store holds now; nil when it may. Changes nothing.
    func refusal(configuring token: String, environment: String) async -> String? {
        // An unreadable store is checked again under its lock before anything is sent.
        let stored = try? await store.load()
        let origin = RefreshTokenRecord.fingerprint(token)
        return machine.refusal(of: origin, environment: environment, stored: stored)?.explanation(store: store.location)
    }

    /// A reload (or a switch) kept this manager: new options apply from now on (a refresh
    /// under way keeps going), the environment joins the family's owners, a changed refresh
    /// token is taken, and a stopped refresh starts again.
    func reconfigure(_ options: AuthRefreshOptions, endpoint: TokenEndpoint, environment: String) {
        self.options = options
        self.endpoint = endpoint
        machine.update(Self.settings(options, environment: environment))
        checkConfiguredToken()
        if machine.resume() {
            logger.notice("refreshing resumes after a reload", metadata: ["endpoint": .string(options.tokenEndpoint.description)])
        }
        publishHealth()
        wakeup.signal()
    }

    // MARK: Handing out tokens

    /// A valid access token, refreshing first when there is none or it has expired.
    func token() async throws -> AccessToken {
        try await handout().token
    }

    /// ``token()``, and whether the caller waited for a refresh to get it. A refresh this
    /// call starts is a span of `record`'s trace (its `traceparent` goes to the token endpoint).
    func handout(record: RequestRecord? = nil) async throws -> TokenHandout {
        try await perform(machine.tokenWanted(now: clock.now()), record: record)
    }

    /// The token to retry with after the upstream answered 401 to `seen`.
    func tokenAfterUnauthorized(seen: AccessToken, record: RequestRecord? = nil) async throws -> AccessToken {
        try await perform(machine.upstreamRejected(seen, now: clock.now()), record: record).token
    }

    private func perform(_ action: TokenRefreshStateMachine.CallerAction, record: RequestRecord?) async throws -> TokenHandout {
        let flight: RefreshFlight
        switch action {
        case .use(let token):
            return TokenHandout(token: token, refreshed: false)
        case .fail(let error):
            throw error
        case .startAndWait:
            flight = startFlight(record: record)
        case .wait:
            guard let current = self.flight else { throw ProxyError.internal }
            flight = current
        }
        switch await flight.wait(timeout: options.timeout) {
        case .done(let outcome):
            return TokenHandout(token: try outcome.get(), refreshed: true)
        case .timedOut:
            if slowSince == nil, self.flight === flight {
                slowSince = clock.now()
                publishHealth()
            }
            throw ProxyError.upstreamTimeout(
                "The token endpoint did not answer within \(Units.format(options.timeout)); Veneer keeps waiting for its answer in the background.")
        case .cancelled:
            throw CancellationError()
        }
    }

    // MARK: Refreshing

    /// Starts the refresh the machine asked for, in a task of its own; its token endpoint
    /// call is a span in the trace of `record`, the request that started it, or (none: the
    /// loop started it ahead of expiry) in a trace of its own (``BackgroundTrace``).
    private func startFlight(record: RequestRecord? = nil) -> RefreshFlight {
        let flight = RefreshFlight()
        self.flight = flight
        let background = record == nil ? spans.map { BackgroundTrace("auth_refresh refresh", to: $0) } : nil
        // Unstructured on purpose: no caller's cancellation or timeout may abandon a request
        // whose answer can hold the only valid refresh token.
        Task {
            await self.fly(flight, record: record ?? background?.record)
            background?.end()
        }
        return flight
    }

    /// The refresh, as the only refresher of this client among every instance sharing the store.
    private func fly(_ flight: RefreshFlight, record: RequestRecord?) async {
        let lockName = "auth_refresh:" + options.stateName
        do {
            try await store.withLock(lockName) { await self.flyHoldingLock(flight, record: record) }
        } catch {
            // The lock (a shared store) is out of reach: nothing was sent.
            let reason = Self.describe(error)
            if case .finish(let outcome) = machine.storeUnavailable(reason) {
                logger.warning("the token store is unavailable; no refresh is sent until it is back", metadata: ["reason": .string(reason)])
                finish(flight, outcome)
            }
        }
    }

    private func flyHoldingLock(_ flight: RefreshFlight, record: RequestRecord?) async {
        var action: TokenRefreshStateMachine.FlightAction
        do {
            let record = try await store.load()
            action = machine.storeRead(record, now: clock.now())
            if case .markInFlight = action, let record, let since = machine.leftByAStop(record) {
                logInFlight(record, since: since, when: "before this refresh")
            }
            if case .stopped(.familyRefused(let refusal)) = machine.state {
                logger.error("refreshing stopped: the token store now holds another token family, which is not overwritten",
                             metadata: ["reason": .string(refusal.explanation(store: store.location))])
            }
        } catch {
            let reason = Self.describe(error)
            logger.warning("the token store cannot be read; no refresh is sent until it can", metadata: ["reason": .string(reason)])
            action = machine.storeUnavailable(reason)
        }
        var answeredAt = ContinuousClock.now
        var expiresIn: Int?
        var rotated = false
        while true {
            switch action {
            case .markInFlight(let marker):
                do {
                    try await store.save(marker)
                    action = machine.markedInFlight(now: clock.now())
                } catch {
                    let reason = Self.describe(error)
                    logger.error("the token store cannot be written; no refresh is sent until it can", metadata: ["reason": .string(reason)])
                    action = machine.markFailed(reason)
                }
            case .send(let refreshToken):
                refreshCount += 1
                logger.debug("refreshing the access token", metadata: ["endpoint": .string(options.tokenEndpoint.description)])
                let result = await endpoint.refresh(with: refreshToken, record: record)
                answeredAt = ContinuousClock.now
                if case .granted(_, let seconds, let newToken) = result {
                    expiresIn = seconds
                    rotated = newToken != nil
                }
                action = machine.answered(result, now: clock.now(), jitter: Double.random(in: 0...1))
                logAnswer(result)
            case .save(let record):
                // Tried again (still holding the lock) before giving up: once the lock is
                // released, another instance must find the new refresh token, not the used one.
                var failure: String?
                for attempt in 1...3 {
                    do {
                        try await store.save(record)
                        failure = nil
                        break
                    } catch {
                        failure = Self.describe(error)
                        if attempt < 3 { try? await Task.sleep(for: .milliseconds(100 * attempt)) }
                    }
                }
                let window = ContinuousClock.now - answeredAt
                if let failure {
                    logger.error("the rotated refresh token could not be saved; it is held in memory only, and no refresh is sent until it is saved",
                                 metadata: ["reason": .string(failure)])
                    action = machine.saveFailed(failure)
                } else {
                    logger.info("access token refreshed", metadata: [
                        "expires_in": .string(expiresIn.map(String.init) ?? "unknown"), "rotated": .stringConvertible(rotated),
                        // From the answer's arrival to its state on disk: the window of README's auth_refresh section.
                        "saved_after_us": .stringConvertible(window.components.seconds * 1_000_000 + window.components.attoseconds / 1_000_000_000_000),
                    ])
                    action = machine.saved()
                }
            case .clearMark(let record):
                do {
                    try await store.save(record)
                    action = machine.markCleared()
                } catch {
                    logger.warning("the in-flight mark of a refresh token the endpoint did not use could not be cleared",
                                   metadata: ["reason": .string(Self.describe(error))])
                    action = machine.markClearFailed()
                }
            case .finish(let outcome):
                finish(flight, outcome)
                return
            case .ignore:
                // Only a bug gets here: release the waiters rather than leave them hanging.
                logger.error("token refresh: an event did not fit the state machine's phase")
                finish(flight, .failure(.internal))
                return
            }
        }
    }

    private func logAnswer(_ result: TokenGrantResult) {
        metrics.answered(result)
        switch result {
        case .granted:
            break
        case .rejected(let reason):
            logger.error("refresh token rejected; refreshing stopped", metadata: ["endpoint": .string(options.tokenEndpoint.description), "reason": .string(reason)])
        case .failed(let error):
            logger.warning("token refresh failed; backing off", metadata: ["failures": .stringConvertible(machine.failures), "error": .string(error.message)])
        case .unknown(let error):
            logger.error("refresh outcome unknown; refreshing stopped, and this refresh token is not sent again until a reload or a new refresh token",
                         metadata: ["endpoint": .string(options.tokenEndpoint.description), "error": .string(error.message)])
        }
    }

    private func finish(_ flight: RefreshFlight, _ outcome: Result<AccessToken, ProxyError>) {
        if self.flight === flight { self.flight = nil }
        slowSince = nil
        flight.finish(outcome)
        publishHealth()
        // A new token (maybe expiring sooner) or a new state: the loop reschedules.
        wakeup.signal()
    }

    private func logInFlight(_ record: RefreshTokenRecord, since: Date, when: String) {
        logger.warning("""
            the saved refresh token was in flight when Veneer last stopped: the token endpoint may have rotated it without \
            its answer being saved. Veneer presents it again; if the authorization server has no reuse grace period it \
            revokes the token family, and a new refresh token must be provided
            """, metadata: [
                "refresh_token_sha256": .string(record.shortFingerprint), "sent_at": .string(ISO8601DateFormatter().string(from: since)),
                "noticed": .string(when),
            ])
    }

    // MARK: The background loop

    /// Refreshes `refresh_before_expiry` ahead, retries an unwritable store, watches the
    /// refresh token file (and the store's recovery); wakes at once whenever the state changes.
    func run() async {
        let changes = store.changes()
        await withTaskGroup(of: Void.self) { group in
            if let changes {
                group.addTask {
                    for await change in changes where change == .resync { await self.storeMayBeBack() }
                }
            }
            group.addTask { await self.loop() }
            _ = await group.next()
            group.cancelAll()
        }
    }

    private func loop() async {
        while !Task.isCancelled {
            checkConfiguredToken()
            switch machine.timerFired(now: clock.now()) {
            case .none:
                break
            case .startRefresh:
                _ = startFlight()
                // The backoff may have ended: health says what is happening now.
                publishHealth()
            case .checkStore(let unsaved):
                await checkStore(unsaved)
            }
            // The token file is looked at every second, whatever else is due.
            var pause = Self.fileCheckInterval
            // The pause is counted from this reading, not from when the sleeping task starts
            // (later, on a busy machine): a wake is never pushed past its time. Read after the
            // turn's work, so a slow store check is still followed by a whole pause.
            let turn = clock.monotonic()
            let now = clock.now()
            if let wake = machine.nextWake(now: now) {
                // A wake far off (an expiry from the endpoint or the store) is past the pause anyway.
                pause = min(pause, .clamping(seconds: wake.timeIntervalSince(now), to: .milliseconds(1) ... pause))
            }
            await wakeup.wait(until: turn + pause, clock: clock)
        }
    }

    static let fileCheckInterval: Duration = .seconds(1)

    private func storeMayBeBack() async {
        if case .checkStore(let unsaved) = machine.storeMayBeBack() {
            await checkStore(unsaved)
            wakeup.signal()
        }
    }

    /// Saves the state whose save failed (under the lock), or probes the store.
    private func checkStore(_ unsaved: RefreshTokenRecord?) async {
        let probe: TokenStoreProbe
        if let unsaved {
            do {
                let store = self.store
                try await store.withLock("auth_refresh:" + options.stateName) { try await store.save(unsaved) }
                probe = .writable
            } catch {
                probe = .unwritable(reason: Self.describe(error), permanent: false)
            }
        } else {
            probe = await store.probe()
        }
        if machine.storeChecked(probe) {
            logger.notice("the token store can be written again; refreshing resumes", metadata: ["saved_held_token": .stringConvertible(unsaved != nil)])
        }
        publishHealth()
    }

    /// Takes a new configured refresh token (the file changed, or a reload brought another),
    /// unless its family may not be taken (``TokenFamily``).
    private func checkConfiguredToken() {
        guard let text = try? options.refreshToken.reveal() else { return }
        let configured = TokenRefreshStateMachine.Credentials(initial: text)
        guard configured.origin != machine.initial.origin else {
            if refusedToken != nil {
                refusedToken = nil
                publishHealth()
            }
            return
        }
        switch machine.initialTokenChanged(configured) {
        case .unchanged, .deferred:
            return
        case .taken:
            refusedToken = nil
            logger.notice("a new refresh token was provided; it replaces the one held", metadata: ["endpoint": .string(options.tokenEndpoint.description)])
        case .refused(let refusal):
            guard refusedToken?.origin != configured.origin else { return }
            let reason = "the new refresh token is not taken: " + refusal.explanation(store: store.location)
            refusedToken = (configured.origin, reason)
            logger.error("\(reason)", metadata: ["endpoint": .string(options.tokenEndpoint.description)])
        }
        publishHealth()
    }

    /// SIGTERM, or no chain holds this manager any more: a refresh under way is awaited (the
    /// service group cancels this at `drain_timeout`), and a state whose save failed is tried
    /// once more.
    func close() async {
        if let flight, !flight.isFinished {
            logger.notice("waiting for the token refresh under way before stopping")
            _ = await flight.outcome()
        }
        if let unsaved = machine.unsaved {
            do {
                try await store.save(unsaved)
                logger.notice("the rotated refresh token held in memory was saved at shutdown")
            } catch {
                logger.error("the rotated refresh token held in memory could not be saved at shutdown; the next start presents an older one",
                             metadata: ["reason": .string(Self.describe(error))])
            }
        }
    }

    // MARK: Health

    private func publishHealth() {
        metrics.update(machine)
        var problem = machine.problem ?? refusedToken?.reason
        if problem == nil, slowSince != nil, case .refreshing(let refresh) = machine.state, case .sent(let marker, let deadline) = refresh.phase {
            // Said when a caller gave up: the request is older than timeout by then. Times, not
            // an age: this text stays as it is until the next change.
            let sent = marker.inFlightSince.map { " sent at " + Timestamp.iso8601($0) } ?? ""
            problem = "the token endpoint has not answered the refresh request\(sent) within timeout (\(Units.format(options.timeout))); "
                + "Veneer waits for its answer until \(Timestamp.iso8601(deadline)) (refresh_wait, \(Units.format(options.refreshWait)))"
        }
        if let problem { health.report(healthName, .degraded(problem)) } else { health.remove(healthName) }
        if let storage = machine.storageProblem { health.report(healthName + " storage", .degraded(storage)) } else { health.remove(healthName + " storage") }
    }

    /// For tests: the state of the refresh.
    var state: TokenRefreshStateMachine.State { machine.state }

    static func describe(_ error: any Error) -> String {
        if let error = error as? StoreError { return error.reason }
        return ErrorText.describe(error)
    }
}
