import Foundation
import Synchronization
import Testing
import VeneerCore
import VeneerTestSupport

/// Veneer (in-process, manual clock) with auth_refresh in front of an upstream that checks
/// tokens against a real token endpoint.
struct AuthRig {
    let veneer: RunningVeneer
    let tokens: TestTokenServer
    let upstream: TestUpstream
    let clock: ManualClock
    let stateDirectory: String
}

/// `reloadable`: the auth_refresh options and the entries before it, read again at each reload
/// (then `options` is unused).
func withAuth<T>(
    options: String = "", environment: String = "", reloadable: (options: YAMLBox, before: YAMLBox)? = nil,
    settings: TestTokenServer.Settings = TestTokenServer.Settings(),
    upstreamReply: (@Sendable (RecordedRequest, TestTokenServer) -> UpstreamReply)? = nil,
    _ body: (AuthRig) async throws -> T
) async throws -> T {
    let clock = ManualClock(start: Date())
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    try "rt-0\n".write(toFile: directory + "/refresh-token", atomically: true, encoding: .utf8)
    try "s3cret".write(toFile: directory + "/client-secret", atomically: true, encoding: .utf8)
    let tokens = try await TestTokenServer.start(clock: clock, settings: settings)
    do {
        let result = try await withTestUpstream({ request in
            upstreamReply?(request, tokens) ?? tokens.protectedReply(request)
        }) { (upstream: TestUpstream) async throws -> T in
            let yaml = { @Sendable (options: String, before: String) in
                """
                state_dir: \(directory)/state
                environments:
                  development:
                    origin: { upstream: { url: "\(upstream.url)" } }
                    \(environment)
                    chain:
                      \(before)
                      - auth_refresh:
                          token_url: \(tokens.url)
                          client_id: veneer
                          client_secret_file: \(directory)/client-secret
                          refresh_token_file: \(directory)/refresh-token
                          \(options)
                """
            }
            let provider = reloadable.map { boxes in { @Sendable in yaml(boxes.options.value, boxes.before.value) } }
            return try await withVeneer(yaml: yaml(options, ""), clock: clock, yamlProvider: provider) { (veneer: RunningVeneer) async throws -> T in
                try await body(AuthRig(veneer: veneer, tokens: tokens, upstream: upstream, clock: clock, stateDirectory: directory))
            }
        }
        await tokens.stop()
        return result
    } catch {
        await tokens.stop()
        throw error
    }
}

@Suite("auth_refresh against a real token endpoint", .serialized)
struct AuthRefreshTests {
    @Test("callers send nothing; Veneer injects a Bearer token from the refresh_token grant with Basic client auth")
    func injects() async throws {
        try await withAuth { (rig: AuthRig) async throws in
            let response = try await rig.veneer.request("GET", "/posts/1")
            #expect(response.status == 200)
            let sent = try #require(rig.upstream.requests.last?.header("authorization"))
            #expect(sent.hasPrefix("Bearer at-"))
            let form = try #require(rig.tokens.forms.first)
            #expect(form["grant_type"] == "refresh_token" && form["refresh_token"] == "rt-0")
            #expect(form["client_secret"] == nil)
            #expect(rig.tokens.authorizations.first == "Basic " + Data("veneer:s3cret".utf8).base64EncodedString())
        }
    }

    @Test("client_auth: body sends the client credentials in the form, and scope is asked for")
    func bodyAuth() async throws {
        try await withAuth(options: "client_auth: body\n          scope: posts.read posts.write") { (rig: AuthRig) async throws in
            #expect(try await rig.veneer.request("GET", "/posts/1").status == 200)
            let form = try #require(rig.tokens.forms.first)
            #expect(form["client_id"] == "veneer" && form["client_secret"] == "s3cret")
            #expect(form["scope"] == "posts.read posts.write")
            #expect(rig.tokens.authorizations.first == .some(nil))
        }
    }

    @Test("a rotated refresh token is saved atomically (0600) before it is used")
    func rotationSaved() async throws {
        try await withAuth { (rig: AuthRig) async throws in
            _ = try await rig.veneer.request("GET", "/posts/1")
            let directory = rig.stateDirectory + "/state/auth_refresh"
            let files = try FileManager.default.contentsOfDirectory(atPath: directory)
            #expect(files.count == 1, "no temporary files left behind: \(files)")
            let path = directory + "/" + files[0]
            let saved = try String(contentsOfFile: path, encoding: .utf8)
            #expect(saved.contains("\"refresh_token\":\"\(rig.tokens.currentRefreshToken!)\""))
            let permissions = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
            #expect(permissions == 0o600)
        }
    }

    @Test("the token is refreshed refresh_before_expiry ahead, without a request")
    func proactive() async throws {
        var settings = TestTokenServer.Settings()
        settings.expiresIn = 120
        try await withAuth(options: "refresh_before_expiry: 20s", settings: settings) { (rig: AuthRig) async throws in
            _ = try await rig.veneer.request("GET", "/posts/1")
            #expect(rig.tokens.refreshes == 1)
            rig.clock.advance(by: .seconds(95))
            // A refresh that must not happen cannot be awaited: give the woken loop a moment.
            try await Task.sleep(for: .milliseconds(100))
            #expect(rig.tokens.refreshes == 1, "not due yet")
            rig.clock.advance(by: .seconds(10))
            try await eventually("the proactive refresh") { rig.tokens.refreshes == 2 }
            #expect(rig.tokens.refreshes == 2)
            #expect(try await rig.veneer.request("GET", "/posts/1").status == 200)
            #expect(rig.tokens.refreshes == 2)
        }
    }

    @Test("a reload whose build fails on another entry leaves the token manager's options as they were; a good one applies them")
    func failedReloadKeepsOptions() async throws {
        let options = YAMLBox("scope: before\n          refresh_wait: 5m\n          refresh_before_expiry: 0s")
        let before = YAMLBox("")
        var settings = TestTokenServer.Settings()
        settings.expiresIn = 60
        try await withAuth(reloadable: (options, before), settings: settings) { (rig: AuthRig) async throws in
            #expect(try await rig.veneer.request("GET", "/posts/1").status == 200)
            #expect(rig.tokens.forms.last?["scope"] == "before")
            options.set("scope: after\n          refresh_wait: 10m\n          refresh_before_expiry: 0s")
            // Decodes (check only warns of a secret file it cannot read), and fails only when
            // built, after the first auth_refresh was.
            before.set("- auth_refresh: {token_url: \"http://127.0.0.1:9/broken\", client_id: broken, "
                + "client_secret_file: /nonexistent/veneer/secret, refresh_token: r}")
            guard case .failure(let error) = await rig.veneer.instance.reload() else {
                Issue.record("the reload should fail")
                return
            }
            #expect(error.diagnostics.contains { $0.description.contains("/nonexistent/veneer/secret") })
            rig.clock.advance(by: .seconds(61))
            #expect(try await rig.veneer.request("GET", "/posts/1").status == 200)
            #expect(rig.tokens.refreshes == 2)
            #expect(rig.tokens.forms.last?["scope"] == "before", "the failed reload changed nothing")

            before.set("")
            #expect((try? await rig.veneer.instance.reload().get())?.number == 2)
            rig.clock.advance(by: .seconds(61))
            #expect(try await rig.veneer.request("GET", "/posts/1").status == 200)
            #expect(rig.tokens.refreshes == 3)
            #expect(rig.tokens.forms.last?["scope"] == "after")
        }
    }

    @Test("50 concurrent requests across an expiry cause exactly one refresh and no reuse")
    func singleFlight() async throws {
        var settings = TestTokenServer.Settings()
        settings.expiresIn = 60
        settings.delay = .milliseconds(100)
        try await withAuth(options: "refresh_before_expiry: 0s", settings: settings) { (rig: AuthRig) async throws in
            #expect(try await rig.veneer.request("GET", "/posts/1").status == 200)
            #expect(rig.tokens.refreshes == 1)
            rig.clock.advance(by: .seconds(61))
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<50 { group.addTask { try await rig.veneer.request("GET", "/posts/1").status } }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses == Array(repeating: 200, count: 50))
            #expect(rig.tokens.refreshes == 2)
            #expect(rig.tokens.reuses == 0)
        }
    }

    @Test("a 401 refreshes and retries once; concurrent 401s refresh once; a second 401 goes to the caller")
    func reactive() async throws {
        let rejectAll = Mutex(false)
        let rejectedFirst = Mutex<Set<String>>([])
        try await withAuth(upstreamReply: { request, tokens in
            if rejectAll.withLock({ $0 }) { return .json(#"{"error":"nope"}"#, status: 401) }
            // The upstream revokes the first token it sees (as if it had been invalidated server-side).
            let token = request.header("authorization") ?? ""
            if token == "Bearer at-1" {
                _ = rejectedFirst.withLock { $0.insert(token) }
                return .json(#"{"error":"invalid_token"}"#, status: 401)
            }
            return tokens.protectedReply(request)
        }) { (rig: AuthRig) async throws in
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<20 { group.addTask { try await rig.veneer.request("GET", "/posts/1").status } }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses == Array(repeating: 200, count: 20))
            #expect(rig.tokens.refreshes == 2, "one initial refresh, one for all the 401s")
            #expect(rig.tokens.reuses == 0)
            rejectAll.withLock { $0 = true }
            rig.upstream.reset()
            let refused = try await rig.veneer.request("GET", "/posts/1")
            #expect(refused.status == 401 && refused.text == #"{"error":"nope"}"#, "the upstream's own 401 is passed on")
            #expect(rig.upstream.count == 2, "retried exactly once")
        }
    }

    @Test("with trace, Server-Timing says what auth_refresh did: the token's time left, a retry after 401")
    func trace() async throws {
        let rejectNext = Mutex(false)
        try await withAuth(environment: "trace: true", upstreamReply: { request, tokens in
            if rejectNext.withLock({ reject in defer { reject = false }; return reject }) { return .json(#"{"error":"invalid_token"}"#, status: 401) }
            return tokens.protectedReply(request)
        }) { (rig: AuthRig) async throws in
            // Refreshed for this request, or by the refresh loop just before it (then the token is new).
            let first = try await rig.veneer.request("GET", "/posts/1")
            let firstTiming = first.header("server-timing") ?? ""
            #expect(first.status == 200, "\(firstTiming)")
            #expect(firstTiming.hasPrefix(#"auth_refresh;desc="refreshed", upstream;dur="#)
                    || firstTiming.hasPrefix(#"auth_refresh;desc="token 60s left", upstream;dur="#), "\(firstTiming)")
            rig.clock.advance(by: .seconds(19))
            let second = try await rig.veneer.request("GET", "/posts/1")
            #expect(second.header("server-timing")?.hasPrefix(#"auth_refresh;desc="token 41s left", upstream;dur="#) == true,
                    "\(second.headers("server-timing"))")
            rejectNext.withLock { $0 = true }
            let retried = try await rig.veneer.request("GET", "/posts/1")
            #expect(retried.status == 200)
            #expect(retried.header("server-timing")?.hasPrefix(#"auth_refresh;desc="token 41s left, retried after 401", upstream;desc="2 exchanges";dur="#)
                    == true, "\(retried.headers("server-timing"))")
        }
    }

    @Test("invalid_grant stops refreshing: 401 unauthorized, health degraded, no retry storm; a new refresh token resumes")
    func invalidGrant() async throws {
        try await withAuth { (rig: AuthRig) async throws in
            _ = try await rig.veneer.request("GET", "/posts/1")
            rig.tokens.issueNewFamily("rt-new")
            // Revoke everything the client holds by replaying its first (already rotated) token.
            rig.tokens.update { $0.failWith = nil }
            let replay = try await RawHTTP.request(port: rig.tokens.upstream.port, "POST", "/oauth/token",
                                                   headers: [("Authorization", "Basic " + Data("veneer:s3cret".utf8).base64EncodedString()),
                                                             ("Content-Type", "application/x-www-form-urlencoded")],
                                                   body: "grant_type=refresh_token&refresh_token=rt-0")
            #expect(replay.status == 400)
            rig.clock.advance(by: .seconds(61))
            let denied = try await rig.veneer.request("GET", "/posts/1")
            #expect(denied.status == 401 && denied.errorCode == "unauthorized")
            let requestsAfterStop = rig.tokens.forms.count
            for _ in 0..<10 { #expect(try await rig.veneer.request("GET", "/posts/1").status == 401) }
            #expect(rig.tokens.forms.count == requestsAfterStop, "no more token requests while stopped")
            let health = try await rig.veneer.request("GET", "/-/health")
            #expect(health.status == 503)
            #expect((health.json?["problems"] as? [String])?.first?.contains("invalid_grant") == true)

            try "rt-new\n".write(toFile: rig.stateDirectory + "/refresh-token", atomically: true, encoding: .utf8)
            rig.clock.advance(by: .seconds(3))
            try await eventually("the new refresh token file is picked up: health 200") { (try? await rig.veneer.request("GET", "/-/health").status) == 200 }
            #expect(try await rig.veneer.request("GET", "/posts/1").status == 200)
            #expect(rig.tokens.forms.last?["refresh_token"] == "rt-new")
        }
    }

    @Test("a failing token endpoint is retried with backoff; callers get 502 at once, not a hang")
    func backoff() async throws {
        var settings = TestTokenServer.Settings()
        settings.failWith = 503
        try await withAuth(settings: settings) { (rig: AuthRig) async throws in
            var slowest = Duration.zero
            for _ in 0..<10 {
                let start = ContinuousClock.now
                let response = try await rig.veneer.request("GET", "/posts/1")
                slowest = max(slowest, ContinuousClock.now - start)
                #expect(response.status == 502 && response.errorCode == "upstream_unavailable")
            }
            // Each at once, not at the 10 s timeout nor at the backoff's end (the ten together took
            // 6.5 s on a loaded run: the bound is per caller).
            #expect(slowest < .seconds(5), "the slowest caller waited \(slowest)")
            #expect(rig.tokens.forms.count <= 2, "backing off, not one token request per caller")
            #expect(try await rig.veneer.request("GET", "/-/health").status == 503)
            rig.tokens.update { $0.failWith = nil }
            rig.clock.advance(by: .seconds(61))
            try await eventually("a request is served after the backoff") { (try? await rig.veneer.request("GET", "/posts/1").status) == 200 }
            #expect(try await rig.veneer.request("GET", "/posts/1").status == 200)
            #expect(try await rig.veneer.request("GET", "/-/health").status == 200)
        }
    }

    @Test("a slow token endpoint is a 504 after the timeout")
    func slowEndpoint() async throws {
        // No answer until the rig stops (a 1 s delay left a loaded run 700 ms to fire the timeout).
        var settings = TestTokenServer.Settings()
        settings.hold = true
        try await withAuth(options: "timeout: 300ms", settings: settings) { (rig: AuthRig) async throws in
            let response = try await rig.veneer.request("GET", "/posts/1")
            #expect(response.status == 504 && response.errorCode == "upstream_timeout")
            // The answer now: shutting down waits for a refresh in flight.
            rig.tokens.release()
        }
    }

    @Test("caller_authorization: replace overrides a caller's header; pass leaves it untouched")
    func callerAuthorization() async throws {
        try await withAuth { (rig: AuthRig) async throws in
            _ = try await rig.veneer.request("GET", "/posts/1", headers: [("Authorization", "Bearer caller")])
            #expect(rig.upstream.requests.last?.header("authorization")?.hasPrefix("Bearer at-") == true)
        }
        try await withAuth(options: "caller_authorization: pass") { (rig: AuthRig) async throws in
            let response = try await rig.veneer.request("GET", "/posts/1", headers: [("Authorization", "Bearer caller")])
            #expect(response.status == 401, "the upstream refuses the caller's own token")
            #expect(rig.upstream.requests.last?.header("authorization") == "Bearer caller")
            #expect(rig.upstream.count == 1, "no refresh-and-retry for a caller's own token")
        }
    }

    @Test("secrets never show in /-/chain")
    func redacted() async throws {
        try await withAuth(options: "refresh_before_expiry: 10s") { (rig: AuthRig) async throws in
            _ = try await rig.veneer.request("GET", "/posts/1")
            let chain = try await rig.veneer.request("GET", "/-/chain").text
            for secret in ["s3cret", "rt-0", "rt-1", "at-1"] { #expect(!chain.contains(secret)) }
            #expect(chain.contains("client_secret_file"))
        }
    }
}
