import Foundation
import Synchronization
import VeneerCore

/// A real OAuth 2.0 token endpoint for tests (served by a ``TestUpstream``): it issues
/// short-lived access tokens, rotates refresh tokens, and — as RFC 9700 §4.14.2 asks —
/// revokes the whole token family when an already-rotated refresh token is presented again
/// (unless ``Settings/reuseGrace`` allows the previous one for a while, as some servers do).
///
/// It rotates when it receives a request, before its (maybe delayed, ``Settings/delay``)
/// answer, and answers whether or not the client still waits: an answer the client gave up
/// on is lost with the only valid refresh token in it, as with a real server.
public final class TestTokenServer: Sendable {
    public struct Settings: Sendable {
        /// Seconds an access token lives.
        public var expiresIn: Int = 60
        /// Whether each refresh returns a new refresh token.
        public var rotate = true
        /// The client credentials it accepts.
        public var clientID = "veneer"
        public var clientSecret = "s3cret"
        /// Answer this status (for failure tests) instead of issuing tokens; nil: work normally.
        public var failWith: Int?
        /// How many requests ``failWith`` answers before the server works normally again (nil:
        /// every one): a failure that ends by itself, whenever the client asks again.
        public var failures: Int?
        /// Wait before answering (after rotating).
        public var delay: Duration = .zero
        /// Answers (after rotating and `delay`) wait until ``TestTokenServer/release()``: the
        /// test, not a timer, decides that an answer comes after the client gave up.
        public var hold = false
        /// Once the ``failures`` have been answered, the answers that follow are held as with
        /// ``hold`` (until ``TestTokenServer/release()``): the test sees the state between a
        /// failure and the client's retry of it, however late it looks.
        public var holdAfterFailures = false
        /// For this long after a rotation, the refresh token it replaced is accepted again
        /// (answered with a new access token and the current refresh token) instead of
        /// revoking the family; nil: never (strict rotation).
        public var reuseGrace: Duration?
        public init() {}
    }

    struct State {
        var settings = Settings()
        /// refresh token -> family; the current token of each family.
        var family: [String: Int] = [:]
        var current: [Int: String] = [:]
        /// The token each family's current one replaced, and when (for the reuse grace).
        var previous: [Int: (token: String, at: ContinuousClock.Instant)] = [:]
        var revoked: Set<Int> = []
        /// access token -> (expiry, family)
        var access: [String: (Date, Int)] = [:]
        var counter = 0
        var refreshes = 0
        var reuses = 0
        var reused: [String] = []
        var graceReuses = 0
        var pending = 0
        var rotatedAt: [String: ContinuousClock.Instant] = [:]
        var requests: [[String: String]] = []
        var arrivals: [ContinuousClock.Instant] = []
        var authorizations: [String?] = []
        /// What the answers held by ``Settings/hold`` wait for.
        var held: Latch?
    }

    private let box: StateBox
    /// The clock that decides expiry (the same manual clock as Veneer's in in-process tests).
    public let clock: any VeneerClock
    private let server: Mutex<TestUpstream?>
    /// Its port (the same after ``stopListening()`` and ``listenAgain()``).
    public let port: Int

    final class StateBox: Sendable {
        let state = Mutex(State())
    }

    /// Starts a token endpoint whose first refresh token is `initial`.
    public static func start(initial: String = "rt-0", clock: any VeneerClock = SystemClock(), settings: Settings = Settings()) async throws -> TestTokenServer {
        let box = StateBox()
        box.state.withLock { state in
            state.settings = settings
            state.family[initial] = 0
            state.current[0] = initial
        }
        let upstream = try await serve(box: box, clock: clock, port: 0)
        return TestTokenServer(box: box, clock: clock, upstream: upstream)
    }

    static func serve(box: StateBox, clock: any VeneerClock, port: Int) async throws -> TestUpstream {
        try await TestUpstream.start(port: port) { request in TestTokenServer.answer(request, box: box, clock: clock) }
    }

    private init(box: StateBox, clock: any VeneerClock, upstream: TestUpstream) {
        self.box = box
        self.clock = clock
        self.server = Mutex(upstream)
        self.port = upstream.port
    }

    /// The upstream serving it (while it listens).
    public var upstream: TestUpstream { server.withLock { $0! } }
    /// `http://127.0.0.1:PORT/oauth/token`.
    public var url: String { "http://127.0.0.1:\(port)/oauth/token" }
    /// Refresh grants answered with new tokens.
    public var refreshes: Int { box.state.withLock { $0.refreshes } }
    /// Presentations of already-rotated refresh tokens that revoked a family.
    public var reuses: Int { box.state.withLock { $0.reuses } }
    /// The rotated refresh tokens whose presentation revoked a family, in order.
    public var reusedTokens: [String] { box.state.withLock { $0.reused } }
    /// Presentations of the previous refresh token within ``Settings/reuseGrace``.
    public var graceReuses: Int { box.state.withLock { $0.graceReuses } }
    /// Requests received and not answered yet.
    public var pending: Int { box.state.withLock { $0.pending } }
    /// The form fields of every request.
    public var forms: [[String: String]] { box.state.withLock { $0.requests } }
    /// When each request arrived (the server's own timing of what a client did, free of the
    /// test's polling).
    public var arrivals: [ContinuousClock.Instant] { box.state.withLock { $0.arrivals } }
    /// The refresh tokens presented, in order.
    public var presented: [String] { box.state.withLock { $0.requests.compactMap { $0["refresh_token"] } } }
    /// The Authorization header of every request.
    public var authorizations: [String?] { box.state.withLock { $0.authorizations } }
    /// The refresh token that is valid now for family 0.
    public var currentRefreshToken: String? { box.state.withLock { $0.current[0] } }
    /// The refresh token valid now in the family that `token` belongs to.
    public func currentRefreshToken(inFamilyOf token: String) -> String? {
        box.state.withLock { state in state.family[token].flatMap { state.current[$0] } }
    }
    /// When `token` was issued (by rotation).
    public func rotatedAt(_ token: String) -> ContinuousClock.Instant? { box.state.withLock { $0.rotatedAt[token] } }
    /// The family `token` belongs to, and whether it is revoked.
    public func isRevoked(_ token: String) -> Bool {
        box.state.withLock { state in state.family[token].map { state.revoked.contains($0) } ?? false }
    }

    /// Changes how it behaves from now on.
    public func update(_ change: (inout Settings) -> Void) { box.state.withLock { change(&$0.settings) } }

    /// Lets the answers held by ``Settings/hold`` (or ``Settings/holdAfterFailures``) go, and holds no more.
    public func release() {
        let held = box.state.withLock { state in
            state.settings.hold = false
            state.settings.holdAfterFailures = false
            defer { state.held = nil }
            return state.held
        }
        held?.open()
    }

    /// Starts a new family from `token` (an operator issuing a new refresh token).
    public func issueNewFamily(_ token: String) {
        box.state.withLock { state in
            state.counter += 1
            let id = 1000 + state.counter
            state.family[token] = id
            state.current[id] = token
        }
    }

    /// Whether an access token is valid now (known, unexpired, family not revoked).
    public func isValid(_ accessToken: String) -> Bool {
        let now = clock.now()
        return box.state.withLock { state in
            guard let (expiry, family) = state.access[accessToken] else { return false }
            return expiry > now && !state.revoked.contains(family)
        }
    }

    /// An upstream reply that checks `Authorization: Bearer` against this server.
    public func protectedReply(_ request: RecordedRequest, body: String = #"{"id":1,"title":"t","body":"b"}"#) -> UpstreamReply {
        guard let header = request.header("authorization"), header.hasPrefix("Bearer "), isValid(String(header.dropFirst(7))) else {
            return .json(#"{"error":"invalid_token"}"#, status: 401, headers: [("WWW-Authenticate", "Bearer error=\"invalid_token\"")])
        }
        return .json(body)
    }

    /// Stops accepting connections (clients are refused) while keeping every token. Returns once
    /// a connection is refused: a child process another test spawns at that moment holds a copy
    /// of the listening socket until its exec, and a client meanwhile would be queued (then
    /// reset once the copy is closed), not refused.
    public func stopListening() async {
        await closeListener()
        let port = port
        _ = try? await poll(timeout: eventuallyTimeout) {
            guard let connection = try? await RawConnection.connect(port: port) else { return true }
            connection.close()
            return false
        }
    }

    private func closeListener() async {
        let upstream = server.withLock { server in
            defer { server = nil }
            return server
        }
        await upstream?.stop()
    }

    /// Listens again on the same port.
    public func listenAgain() async throws {
        let upstream = try await Self.serve(box: box, clock: clock, port: port)
        server.withLock { $0 = upstream }
    }

    static func answer(_ request: RecordedRequest, box: StateBox, clock: any VeneerClock) -> UpstreamReply {
        var form: [String: String] = [:]
        for pair in request.text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "" }
            form[parts[0]] = parts.count > 1 ? parts[1] : ""
        }
        let now = clock.now()
        let (reply, delay, failed): (UpstreamReply, Duration, Bool) = box.state.withLock { state in
            state.requests.append(form)
            state.arrivals.append(ContinuousClock.now)
            state.authorizations.append(request.header("authorization"))
            state.pending += 1
            let settings = state.settings
            if let status = settings.failWith, settings.failures.map({ $0 > 0 }) ?? true {
                state.settings.failures = settings.failures.map { $0 - 1 }
                return (.json(#"{"error":"temporarily_unavailable"}"#, status: status), settings.delay, true)
            }
            // Client authentication: Basic, or client_id/client_secret in the body.
            let basic = "Basic " + Data("\(settings.clientID):\(settings.clientSecret)".utf8).base64EncodedString()
            let authenticated = request.header("authorization") == basic
                || (form["client_id"] == settings.clientID && form["client_secret"] == settings.clientSecret)
            guard authenticated else { return (.json(#"{"error":"invalid_client"}"#, status: 401), settings.delay, false) }
            guard form["grant_type"] == "refresh_token", let presented = form["refresh_token"] else {
                return (.json(#"{"error":"unsupported_grant_type"}"#, status: 400), settings.delay, false)
            }
            guard let family = state.family[presented], !state.revoked.contains(family) else {
                return (.json(#"{"error":"invalid_grant"}"#, status: 400), settings.delay, false)
            }
            var refreshToken: String?
            if state.current[family] != presented {
                if let grace = settings.reuseGrace, let previous = state.previous[family], previous.token == presented,
                   ContinuousClock.now - previous.at <= grace {
                    // Within the grace period: the answer that was lost, again (no new rotation).
                    state.graceReuses += 1
                    refreshToken = state.current[family]
                } else {
                    // Reuse of a rotated token: a stolen copy or a lost update. Revoke everything.
                    state.reuses += 1
                    state.reused.append(presented)
                    state.revoked.insert(family)
                    return (.json(#"{"error":"invalid_grant","error_description":"refresh token reuse"}"#, status: 400), settings.delay, false)
                }
            }
            state.counter += 1
            state.refreshes += 1
            let accessToken = "at-\(state.counter)"
            state.access[accessToken] = (now.addingTimeInterval(TimeInterval(settings.expiresIn)), family)
            var body: [(String, JSONValue)] = [("access_token", .string(accessToken)), ("token_type", .string("Bearer")),
                                               ("expires_in", .int(settings.expiresIn))]
            if refreshToken == nil, settings.rotate {
                let next = "rt-\(state.counter)"
                state.family[next] = family
                state.previous[family] = (presented, ContinuousClock.now)
                state.current[family] = next
                state.rotatedAt[next] = ContinuousClock.now
                refreshToken = next
            }
            if let refreshToken { body.append(("refresh_token", .string(refreshToken))) }
            return (.json(JSONValue.object(body).text), settings.delay, false)
        }
        // Held (after the delay) until the test releases it.
        let held: Latch? = box.state.withLock { state in
            let afterFailures = !failed && state.settings.holdAfterFailures && state.settings.failures == 0
            guard state.settings.hold || afterFailures else { return nil }
            if state.held == nil { state.held = Latch() }
            return state.held
        }
        var delayed = reply
        delayed.delay = delay
        if let held { delayed.gate = { await held.wait() } }
        delayed.onAnswer = { box.state.withLock { $0.pending -= 1 } }
        return delayed
    }

    /// Stops the server (answers still held go first: a graceful stop waits for them).
    public func stop() async {
        release()
        await closeListener()
    }
}
