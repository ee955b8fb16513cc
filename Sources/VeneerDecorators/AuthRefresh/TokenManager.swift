import Foundation
import Logging
import VeneerCore

/// An access token as the manager hands it out.
struct AccessToken: Sendable {
    let value: String
    /// When it expires; nil when the endpoint did not say (then only a 401 refreshes it).
    let expiresAt: Date?
    /// Increases with every refresh: a request that got its 401 with an older token than
    /// the current one retries with the current one instead of refreshing again.
    let generation: Int
}

/// The one token manager of a client (token endpoint + client id): it holds the refresh
/// token, hands out the access token, and refreshes it proactively before expiry and on
/// demand after a 401 — one refresh at a time, whoever asks. A rotated refresh token is
/// saved before the refresh returns, so it is never lost and never used twice.
actor TokenManager: CarriedService {
    enum State {
        case running
        /// The endpoint refused the refresh token; nothing is sent until it changes.
        case stopped(reason: String)
    }

    let options: AuthRefreshOptions
    let endpoint: TokenEndpoint
    let store: any RefreshTokenStore
    let clock: any VeneerClock
    let health: HealthBoard
    let logger: Logger
    let healthName: String

    private var initialSecret: Secret
    private var initialFingerprint = ""
    private var refreshToken: String?
    private var access: AccessToken?
    private var generation = 0
    private var state = State.running
    private var inFlight: Task<AccessToken, any Error>?
    private var failures = 0
    private var retryAt: Date?
    private var lastFailure: ProxyError?
    /// Refreshes sent to the endpoint (for metrics and tests).
    private(set) var refreshCount = 0

    init(options: AuthRefreshOptions, endpoint: TokenEndpoint, store: any RefreshTokenStore, clock: any VeneerClock,
         health: HealthBoard, logger: Logger) {
        self.options = options
        self.endpoint = endpoint
        self.store = store
        self.clock = clock
        self.health = health
        self.logger = logger
        self.initialSecret = options.refreshToken
        self.healthName = "auth_refresh \(options.tokenEndpoint.authority)"
    }

    // MARK: Handing out tokens

    /// A valid access token, refreshing first when there is none or it has expired.
    func token() async throws -> AccessToken {
        if case .stopped(let reason) = state { throw Self.unauthorized(reason) }
        if let access, !isExpired(access, margin: .zero) { return access }
        return try await refresh(because: access == nil ? "no access token yet" : "access token expired")
    }

    /// The token to retry with after the upstream answered 401 to `seen`.
    func tokenAfterUnauthorized(seen: AccessToken) async throws -> AccessToken {
        if let access, access.generation > seen.generation, !isExpired(access, margin: .zero) { return access }
        if case .stopped(let reason) = state { throw Self.unauthorized(reason) }
        return try await refresh(because: "the upstream answered 401", rejected: seen)
    }

    func isExpired(_ token: AccessToken, margin: Duration) -> Bool {
        guard let expiresAt = token.expiresAt else { return false }
        return clock.now().addingTimeInterval(margin.seconds) >= expiresAt
    }

    // MARK: Refreshing

    /// One refresh for everybody who asks while it runs. `rejected` is the token the
    /// upstream refused, if that is the reason.
    func refresh(because reason: String, rejected: AccessToken? = nil) async throws -> AccessToken {
        if let inFlight { return try await inFlight.value }
        if case .stopped(let stopReason) = state { throw Self.unauthorized(stopReason) }
        if let retryAt, clock.now() < retryAt, let lastFailure {
            // Backing off: answer at once instead of piling up on a failing endpoint.
            throw lastFailure
        }
        let task = Task { try await self.performRefresh(reason, rejected: rejected) }
        inFlight = task
        defer { inFlight = nil }
        return try await task.value
    }

    /// Refreshes as the only refresher of this client among every instance sharing the store:
    /// under the lock, a token another instance got meanwhile is adopted instead.
    private func performRefresh(_ reason: String, rejected: AccessToken?) async throws -> AccessToken {
        let lockName = "auth_refresh:" + options.stateName
        do {
            return try await store.withLock(lockName) { try await self.refreshHoldingLock(reason, rejected: rejected) }
        } catch let error as StoreError {
            // The shared token state is out of reach: refreshing alone could present a refresh
            // token another instance already used. Keep the token held and retry later.
            let failure = ProxyError.upstreamUnavailable("The shared token state is unavailable; Veneer cannot refresh its token now.")
            noteFailure(failure, detail: "shared token state unavailable: \(error.reason)")
            throw failure
        }
    }

    private func noteFailure(_ error: ProxyError, detail: String) {
        failures += 1
        // Capped exponential backoff with full jitter: 1s, 2s, 4s ... up to 60s.
        let ceiling = min(60.0, pow(2.0, Double(min(failures - 1, 6))))
        retryAt = clock.now().addingTimeInterval(Double.random(in: (ceiling / 2)...ceiling))
        lastFailure = error
        health.report(healthName, .degraded("\(detail) (\(failures) failure\(failures == 1 ? "" : "s"))"))
        logger.warning("token refresh failed; backing off", metadata: ["failures": .stringConvertible(failures), "error": .string(detail)])
    }

    private func refreshHoldingLock(_ reason: String, rejected: AccessToken?) async throws -> AccessToken {
        let current = try await currentRefreshToken()
        if let shared = try await store.load(), shared.origin == initialFingerprint, shared.generation >= generation {
            // The newest refresh token is the shared one, whoever rotated it. (An older record
            // than what this instance holds is a save that failed here: never go back to it.)
            refreshToken = shared.refreshToken
            if let value = shared.accessToken, shared.generation > (rejected?.generation ?? access?.generation ?? 0) {
                let candidate = AccessToken(value: value, expiresAt: shared.expiresAt, generation: shared.generation)
                if !isExpired(candidate, margin: options.refreshBeforeExpiry) || (rejected != nil && !isExpired(candidate, margin: .zero)) {
                    adopt(candidate)
                    logger.debug("adopted the access token another refresh obtained", metadata: ["generation": .stringConvertible(shared.generation)])
                    return candidate
                }
            }
            generation = max(generation, shared.generation)
        }
        let presented = refreshToken ?? current
        refreshCount += 1
        logger.debug("refreshing the access token", metadata: ["reason": .string(reason), "endpoint": .string(options.tokenEndpoint.description)])
        switch await endpoint.refresh(with: presented) {
        case .granted(let accessToken, let expiresIn, let rotated):
            generation += 1
            let expiresAt = expiresIn.map { clock.now().addingTimeInterval(TimeInterval(max(0, $0))) }
            let token = AccessToken(value: accessToken, expiresAt: expiresAt, generation: generation)
            refreshToken = rotated ?? presented
            // Saved before anything else happens: after a crash from here on, Veneer (and
            // every instance sharing the store) starts from the new refresh token and never
            // presents the old one again.
            let record = RefreshTokenRecord(refreshToken: rotated ?? presented, origin: initialFingerprint,
                                            accessToken: accessToken, expiresAt: expiresAt, generation: generation)
            // Tried again (still holding the lock) before giving up: once the lock is released,
            // another instance must find the new refresh token, not the one just used.
            var saveError: (any Error)?
            for attempt in 1...3 {
                do {
                    try await store.save(record)
                    saveError = nil
                    break
                } catch {
                    saveError = error
                    if attempt < 3 { try? await Task.sleep(for: .milliseconds(200 * attempt)) }
                }
            }
            if let saveError {
                logger.error("the token state could not be saved; it is kept in memory only", metadata: ["error": .string("\(saveError)")])
                health.report(healthName + " storage", .degraded("the rotated refresh token could not be saved: \(saveError)"))
            } else {
                health.remove(healthName + " storage")
            }
            adopt(token)
            logger.info("access token refreshed", metadata: [
                "reason": .string(reason), "expires_in": .string(expiresIn.map(String.init) ?? "unknown"), "rotated": .stringConvertible(rotated != nil),
            ])
            return token
        case .rejected(let why):
            state = .stopped(reason: why)
            access = nil
            health.report(healthName, .degraded("\(why); refreshing stopped until the refresh token changes or the configuration is reloaded"))
            logger.error("refresh token rejected; refreshing stopped", metadata: ["endpoint": .string(options.tokenEndpoint.description), "reason": .string(why)])
            throw Self.unauthorized(why)
        case .unavailable(let error):
            noteFailure(error, detail: "token endpoint unavailable: \(error.message)")
            throw error
        }
    }

    private func adopt(_ token: AccessToken) {
        access = token
        generation = max(generation, token.generation)
        failures = 0
        retryAt = nil
        lastFailure = nil
        health.remove(healthName)
    }

    /// The refresh token to present: the saved rotation of the current initial token, or
    /// the initial token itself when it is new.
    private func currentRefreshToken() async throws -> String {
        if let refreshToken { return refreshToken }
        let initial: String
        do {
            initial = try initialSecret.reveal()
        } catch {
            throw ProxyError(.unauthorized, "Veneer has no usable refresh token.")
        }
        initialFingerprint = RefreshTokenRecord.fingerprint(initial)
        if let saved = try? await store.load(), saved.origin == initialFingerprint {
            refreshToken = saved.refreshToken
            return saved.refreshToken
        }
        refreshToken = initial
        return initial
    }

    /// Starts over from the initial refresh token if it changed (or after a reload), when stopped.
    func resumeIfStopped(initial: Secret) async {
        guard case .stopped = state else { return }
        guard let text = try? initial.reveal() else { return }
        let fingerprint = RefreshTokenRecord.fingerprint(text)
        let changed = fingerprint != initialFingerprint
        initialSecret = initial
        refreshToken = nil
        state = .running
        health.remove(healthName)
        logger.info("refreshing resumes", metadata: ["new_refresh_token": .stringConvertible(changed)])
    }

    static func unauthorized(_ reason: String) -> ProxyError {
        ProxyError(.unauthorized, "Veneer's credentials for the upstream were refused (\(reason)); an operator must provide a new refresh token.")
    }

    // MARK: Background work

    /// Refreshes `refresh_before_expiry` before expiry; while stopped, watches the refresh
    /// token file for a new token.
    func run() async {
        while !Task.isCancelled {
            let pause: Duration
            switch state {
            case .stopped:
                if case .file = initialSecret, let text = try? initialSecret.reveal(), RefreshTokenRecord.fingerprint(text) != initialFingerprint {
                    await resumeIfStopped(initial: initialSecret)
                    continue
                }
                pause = .seconds(2)
            case .running:
                if let retryAt, clock.now() < retryAt {
                    pause = .milliseconds(Int64(max(1, retryAt.timeIntervalSince(clock.now()) * 1000)))
                } else if let access, let expiresAt = access.expiresAt {
                    let due = expiresAt.addingTimeInterval(-options.refreshBeforeExpiry.seconds)
                    let wait = due.timeIntervalSince(clock.now())
                    if wait <= 0 {
                        _ = try? await refresh(because: "the access token expires soon")
                        continue
                    }
                    pause = .milliseconds(Int64(wait * 1000))
                } else if access == nil {
                    _ = try? await refresh(because: "start")
                    if access == nil, retryAt == nil, case .running = state { pause = .seconds(2) } else { continue }
                } else {
                    pause = .seconds(60)
                }
            }
            do {
                try await clock.sleep(for: min(pause, .seconds(60)))
            } catch {
                return
            }
        }
    }

    func close() async {}
}
