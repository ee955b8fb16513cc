import Foundation
import Synchronization
import Testing
import VeneerTestSupport

/// The real binary against a token endpoint that rotates refresh tokens and revokes the whole
/// family when a used one comes back (RFC 9700 §4.14.2): each way Veneer could present a used
/// refresh token, and that it does not.
struct FamilyRig: Sendable {
    let directory: String
    let tokens: TestTokenServer
    let upstream: TestUpstream
    /// Access tokens the upstream refuses with 401 whatever the token server says.
    let refused: RefusedTokens

    var stateFolder: String { directory + "/state/auth_refresh" }
    static let arguments = ["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"]

    /// Writes the configuration: auth_refresh with `options` (YAML lines at its indentation).
    func configure(_ options: [String] = [], tokenURL: String? = nil, top: String = "") throws {
        try """
            state_dir: \(directory)/state
            \(top)
            environments:
              development:
                origin: { upstream: { url: "\(upstream.url)" } }
                chain:
                  - auth_refresh:
                      token_url: \(tokenURL ?? tokens.url)
                      client_id: veneer
                      client_secret_file: \(directory)/client-secret
                      refresh_token_file: \(directory)/refresh-token
            \(options.map { "          " + $0 }.joined(separator: "\n"))
            """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
    }

    func start() async throws -> (VeneerProcess, Int) {
        let process = try VeneerProcess(Self.arguments, directory: directory)
        return (process, try await process.waitUntilReady())
    }

    func get(_ port: Int, _ target: String = "/posts/1") async throws -> RawResponse {
        try await RawHTTP.request(port: port, "GET", target)
    }

    /// The health problems, when degraded.
    func problems(_ port: Int) async -> [String] {
        (try? await RawHTTP.request(port: port, "GET", "/-/health").json?["problems"] as? [String]) ?? []
    }

    /// The saved token state (the one file of the folder).
    func saved() -> [String: Any]? {
        guard let name = try? FileManager.default.contentsOfDirectory(atPath: stateFolder).first(where: { $0.hasSuffix(".json") }),
              let data = FileManager.default.contents(atPath: stateFolder + "/" + name) else { return nil }
        return try? JSONSerialization.jsonObject(with: data) as? [String: Any]
    }

    /// The token folder replaced by a file: every write to it fails (as on a read-only or
    /// full disk), for root too. `restoreStore()` puts the folder back. Each is one swap of the
    /// two (RENAME_EXCHANGE), never a remove and a move: Veneer probes the store meanwhile and
    /// makes the folder when it is missing, and a loaded run saw it do so between the file's
    /// removal and the folder's return (the move then failed: "a file with the same name
    /// already exists").
    func breakStore() throws {
        try "not a folder".write(toFile: stateFolder + ".aside", atomically: false, encoding: .utf8)
        try Self.exchange(stateFolder, stateFolder + ".aside")
    }

    func restoreStore() throws {
        try Self.exchange(stateFolder, stateFolder + ".aside")
        try FileManager.default.removeItem(atPath: stateFolder + ".aside")
    }

    /// Swaps what two paths name, in one step: `renameat2(..., RENAME_EXCHANGE)` (which the
    /// Glibc module does not show).
    static func exchange(_ first: String, _ second: String) throws {
        guard renameAt2(AT_FDCWD, first, AT_FDCWD, second, 2 /* RENAME_EXCHANGE */) == 0 else {
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
    }

    private typealias RenameAt2 = @convention(c) (Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32) -> Int32
    private static let renameAt2 = unsafeBitCast(dlsym(dlopen(nil, RTLD_NOW), "renameat2")!, to: RenameAt2.self)

    /// A new refresh token from the operator: a new family at the server, and the file.
    func provideNewToken(_ token: String) throws {
        tokens.issueNewFamily(token)
        try "\(token)\n".write(toFile: directory + "/refresh-token", atomically: true, encoding: .utf8)
    }
}

final class RefusedTokens: Sendable {
    private let tokens = Mutex<Set<String>>([])
    func insert(_ token: String) { _ = tokens.withLock { $0.insert(token) } }
    func contains(_ token: String) -> Bool { tokens.withLock { $0.contains(token) } }
}

func withFamilyRig<T>(_ settings: TestTokenServer.Settings = TestTokenServer.Settings(), options: [String] = [],
                      _ body: (FamilyRig) async throws -> T) async throws -> T {
    let directory = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    try "rt-0\n".write(toFile: directory + "/refresh-token", atomically: true, encoding: .utf8)
    try "s3cret".write(toFile: directory + "/client-secret", atomically: true, encoding: .utf8)
    let tokens = try await TestTokenServer.start(settings: settings)
    let refused = RefusedTokens()
    do {
        let result = try await withTestUpstream({ request in
            if let header = request.header("authorization"), refused.contains(String(header.dropFirst(7))) {
                return .json(#"{"error":"invalid_token"}"#, status: 401)
            }
            return tokens.protectedReply(request)
        }) { (upstream: TestUpstream) async throws -> T in
            let rig = FamilyRig(directory: directory, tokens: tokens, upstream: upstream, refused: refused)
            try rig.configure(options)
            return try await body(rig)
        }
        await tokens.stop()
        return result
    } catch {
        await tokens.stop()
        throw error
    }
}

@Suite("auth_refresh never burns the token family (the real binary)", .serialized)
struct AuthRefreshFamilyTests {
    // MARK: 1. A refresh request is never abandoned

    @Test("a slow endpoint: callers get 504 at timeout, the refresh is awaited, its rotated token saved and used; nothing is presented twice")
    func slowEndpoint() async throws {
        // The answer is held until the caller has its 504 (the test, not a 4 s delay, says when).
        var settings = TestTokenServer.Settings()
        settings.hold = true
        try await withFamilyRig(settings, options: ["timeout: 300ms"]) { rig in
            let (veneer, port) = try await rig.start()
            defer { veneer.terminate() }
            let first = try await rig.get(port)
            #expect(first.status == 504 && first.errorCode == "upstream_timeout", "the caller got its 504 at timeout, without the answer")
            rig.tokens.release()
            try await eventually("the one refresh is answered") { rig.tokens.refreshes == 1 && rig.tokens.pending == 0 }
            // Veneer was still there to receive the rotated token, and saved it.
            try await eventually("the rotated token is saved") { rig.saved()?["refresh_token"] as? String == rig.tokens.currentRefreshToken }
            #expect(try await rig.get(port).status == 200)
            #expect(rig.tokens.presented == ["rt-0"], "one refresh, its answer used")
            #expect(rig.tokens.reuses == 0)
        }
    }

    @Test("no answer within refresh_wait: refreshing stops (health: refresh outcome unknown) and that token is never sent again; a new token file resumes")
    func refreshWaitEnds() async throws {
        // The endpoint holds its answer until Veneer has given up on it, so refresh_wait can be
        // wide: the refresh of the new token at the end must be answered within it on a loaded
        // run, and was not with 500 ms (load 7) nor with 2 s (two full parallel runs in four,
        // where the test process's event loops fell seconds behind), when a delay longer still
        // stood for the lost answer.
        var settings = TestTokenServer.Settings()
        settings.hold = true
        try await withFamilyRig(settings, options: ["timeout: 1s", "refresh_wait: 10s"]) { rig in
            let (veneer, port) = try await rig.start()
            defer { veneer.terminate() }
            #expect(try await rig.get(port).status == 504)
            try await eventually("health says: refresh outcome unknown", timeout: .seconds(60)) {
                await rig.problems(port).contains { $0.contains("refresh outcome unknown") }
            }
            // The endpoint answers (with a rotated token) after Veneer stopped waiting.
            rig.tokens.release()
            try await eventually("the endpoint answered the refresh") { rig.tokens.pending == 0 }
            #expect(rig.tokens.refreshes == 1)
            for _ in 0..<5 {
                let response = try await rig.get(port)
                #expect(response.status == 502 && response.errorCode == "upstream_unavailable")
            }
            // A refresh that must not be sent cannot be awaited: time for the background loop,
            // which looks every second, to have sent it.
            try await Task.sleep(for: .milliseconds(1500))
            #expect(rig.tokens.presented == ["rt-0"], "the token whose answer was lost is not sent again by itself")
            #expect(rig.tokens.reuses == 0)

            try rig.provideNewToken("rt-new")
            var last = ""
            try await eventually("the new token file resumes: a request is served (last: \(last); Veneer said: \(veneer.stderr.suffix(3000)))") {
                let response = try? await rig.get(port)
                last = response.map { "\($0.status) \($0.errorCode ?? "")" } ?? "no answer"
                return response?.status == 200
            }
            #expect(rig.tokens.presented == ["rt-0", "rt-new"])
            #expect(rig.tokens.reuses == 0)
            #expect(veneer.stderr.contains("refresh outcome unknown"))
        }
    }

    @Test("after outcome unknown a reload resumes: the held token is presented again, which a server with a reuse grace period accepts")
    func reloadResumes() async throws {
        // The answer is held until Veneer has given up on it (a 1 s delay against 400 ms left a
        // loaded run 600 ms).
        var settings = TestTokenServer.Settings()
        settings.hold = true
        // A grace as long as a loaded run may take from the rotation to the reload's presentation
        // (30 s was not, likely, once at load 15: no request served in the 30 s after the reload).
        settings.reuseGrace = .seconds(300)
        try await withFamilyRig(settings, options: ["timeout: 200ms", "refresh_wait: 400ms"]) { rig in
            let (veneer, port) = try await rig.start()
            defer { veneer.terminate() }
            try await eventually("health says: refresh outcome unknown") { await rig.problems(port).contains { $0.contains("refresh outcome unknown") } }
            rig.tokens.release()
            #expect(try await rig.get(port).status == 502)
            // The reload also lifts the tight time-outs that made the first refresh's outcome
            // unknown, so that a busy test run cannot time out the refresh it resumes.
            try rig.configure(["timeout: 5s", "refresh_wait: 5s"])
            veneer.signal(SIGHUP)
            try await eventually("after the reload a request is served") { (try? await rig.get(port).status) == 200 }
            #expect(rig.tokens.presented == ["rt-0", "rt-0"])
            #expect(rig.tokens.graceReuses == 1 && rig.tokens.reuses == 0)
        }
    }

    @Test("only a request that never reached the endpoint is sent again: a refused connection is retried with the same token")
    func neverReachedIsRetried() async throws {
        try await withFamilyRig { rig in
            await rig.tokens.stopListening()
            let (veneer, port) = try await rig.start()
            defer { veneer.terminate() }
            let refused = try await rig.get(port)
            #expect(refused.status == 502 && refused.errorCode == "upstream_unavailable")
            try await eventually("health says: token endpoint unavailable") { await rig.problems(port).contains { $0.contains("token endpoint unavailable") } }
            try await rig.tokens.listenAgain()
            try await eventually("the endpoint listens again: a request is served") { (try? await rig.get(port).status) == 200 }
            #expect(rig.tokens.presented == ["rt-0"])
            #expect(rig.tokens.reuses == 0)
        }
    }

    @Test("a connection lost after the request went out is ambiguous: refreshing stops and the token is not sent again")
    func ambiguousFailureNotRetried() async throws {
        let closing = try await ScriptedUpstream.start { _ in .close }
        defer { Task { await closing.stop() } }
        try await withFamilyRig { rig in
            try rig.configure(tokenURL: closing.url + "/oauth/token")
            let (veneer, port) = try await rig.start()
            defer { veneer.terminate() }
            #expect(try await rig.get(port).status == 502)
            try await eventually("health says: refresh outcome unknown") { await rig.problems(port).contains { $0.contains("refresh outcome unknown") } }
            for _ in 0..<5 { _ = try await rig.get(port) }
            // A repeat that must not come cannot be awaited: time for the loop (every second) to send it.
            try await Task.sleep(for: .milliseconds(1500))
            #expect(closing.received.count == 1, "one request, never repeated")
        }
    }

    @Test("SIGTERM waits for a refresh in flight (up to drain_timeout) and saves its answer; the next start presents the new token")
    func sigtermWaits() async throws {
        // The answer is held until Veneer is stopping (a delay raced a loaded run: its answer
        // could come before the test looked, or before the signal).
        var settings = TestTokenServer.Settings()
        settings.hold = true
        try await withFamilyRig(settings, options: ["timeout: 200ms"]) { rig in
            let (veneer, port) = try await rig.start()
            defer { veneer.terminate() }
            #expect(try await rig.get(port).status == 504)
            // The caller got its 504 at 200 ms; on a loaded run the refresh may reach the endpoint later.
            try await eventually("the refresh is in flight") { rig.tokens.pending == 1 }
            veneer.signal(SIGTERM)
            try await eventually("SIGTERM waits for the refresh") { veneer.stderr.contains("waiting for the token refresh under way") }
            rig.tokens.release()
            #expect(await veneer.wait() == 0)
            #expect(rig.saved()?["refresh_token"] as? String == rig.tokens.currentRefreshToken, "the answer was received and saved before exiting")

            rig.refused.insert("at-1")  // the upstream refuses the saved access token: a refresh follows
            try rig.configure()  // the default time-out: a busy test run must not time out this refresh
            let (again, againPort) = try await rig.start()
            defer { again.terminate() }
            #expect(try await rig.get(againPort).status == 200)
            #expect(rig.tokens.presented == ["rt-0", "rt-1"])
            #expect(rig.tokens.reuses == 0)
        }
    }

    @Test("a reload during a refresh in flight keeps the token manager: the answer is saved and used, the new options apply")
    func reloadDuringRefresh() async throws {
        // The answer is held until the reload is done (a delay raced a loaded run: its answer
        // could come before the test looked, or before the reload).
        var settings = TestTokenServer.Settings()
        settings.hold = true
        try await withFamilyRig(settings, options: ["timeout: 200ms", "refresh_before_expiry: 1s"]) { rig in
            let (veneer, port) = try await rig.start()
            defer { veneer.terminate() }
            #expect(try await rig.get(port).status == 504)
            // The caller got its 504 at 200 ms; on a loaded run the refresh may reach the endpoint later.
            try await eventually("the refresh is in flight") { rig.tokens.pending == 1 }
            try rig.configure(["timeout: 10s", "refresh_before_expiry: 2s"])
            veneer.signal(SIGHUP)
            try await eventually("the reload is done") { veneer.stderr.contains("configuration reloaded") }
            rig.tokens.release()
            // The kept manager's own request, waited for with the new timeout (10 s: wide, where
            // the 200 ms before could not wait for an answer on a loaded run).
            #expect(try await rig.get(port).status == 200)
            #expect(rig.tokens.presented == ["rt-0"])
            #expect(rig.tokens.reuses == 0)
        }
    }

    // MARK: 2. Never rotate what cannot be saved

    @Test("a token store that cannot be written at all: veneer check warns, veneer run exits 78 without a refresh")
    func storeNotWritableAtAll() async throws {
        try await withFamilyRig { rig in
            try FileManager.default.createDirectory(atPath: rig.directory + "/state", withIntermediateDirectories: true)
            try "a file where the token folder goes".write(toFile: rig.stateFolder, atomically: false, encoding: .utf8)
            let check = try await VeneerProcess.run(["check", "--config", "veneer.yaml"], directory: rig.directory)
            #expect(check.status == 0)
            #expect(check.stderr.contains("warning: environments.development.chain[0].auth_refresh: the token store"), "\(check.stderr)")
            let run = try await VeneerProcess.run(FamilyRig.arguments, directory: rig.directory)
            #expect(run.status == 78, "\(run.stderr)")
            #expect(run.stderr.contains("the token store cannot be written"))
            #expect(rig.tokens.forms.isEmpty)
        }
    }

    @Test("while the token store cannot be written no refresh is sent: the access token serves while it lasts, then 502, and refreshing resumes once it can")
    func storeUnwritableAtRuntime() async throws {
        var settings = TestTokenServer.Settings()
        // 8 s, the refresh due 1 s ahead: the store must be broken before that, and a loaded run
        // took longer than the 2 s a 3-s token left from the grant at start to the break (the
        // refresh went out while the store could still be written: rt-1 presented).
        settings.expiresIn = 8
        try await withFamilyRig(settings, options: ["refresh_before_expiry: 1s"]) { rig in
            let (veneer, port) = try await rig.start()
            defer { veneer.terminate() }
            #expect(try await rig.get(port).status == 200)
            let answered = ContinuousClock.now
            // The token server's own time of the grant: the access token expires 8 s after it.
            // (`answered` is later by the request's way back, which a loaded run stretched past
            // the bound below: the token had expired at the upstream when the test still
            // reckoned 200 ms of it left.)
            let granted = try #require(rig.tokens.arrivals.first)
            try rig.breakStore()
            let broken = ContinuousClock.now
            // The proactive refresh comes due after 7 s: it must not be sent.
            try await eventually("health says: token store cannot be written") { await rig.problems(port).contains { $0.contains("token store cannot be written") } }
            // The token still serves once Veneer knows it cannot refresh (its refresh came due at
            // 7 s): an answer that came before 7.8 s was asked of the upstream before the expiry.
            // (Only with time to spare: on a loaded run the request itself may take long.)
            if ContinuousClock.now - granted < .milliseconds(7400) {
                let served = try await rig.get(port).status
                #expect(served == 200 || ContinuousClock.now - granted > .milliseconds(7800), "the access token still serves")
            }
            // Deliberate: the access token (8 s) must expire, by Veneer's reckoning too (from
            // when it had the grant, before `answered`).
            try await Task.sleep(until: answered + .seconds(8), clock: .continuous)
            let expired = try await rig.get(port)
            #expect(expired.status == 502 && expired.errorCode == "upstream_unavailable")
            #expect(rig.tokens.presented == ["rt-0"], "nothing sent while a new refresh token could not be saved (the store was broken \(broken - granted) after the grant; the refresh came due at 7 s)")
            try rig.restoreStore()
            try await eventually("the store can be written again: a request is served") { (try? await rig.get(port).status) == 200 }
            #expect(rig.tokens.presented.prefix(2) == ["rt-0", "rt-1"])
            #expect(rig.tokens.reuses == 0)
        }
    }

    @Test("a rotated token whose save fails is held in memory and saved once the store can be written (at the latest at shutdown); the next start presents it")
    func heldTokenSaved() async throws {
        // The answer is held until the store is broken (an 800 ms delay could end before the
        // test saw the refresh in flight).
        var settings = TestTokenServer.Settings()
        settings.hold = true
        try await withFamilyRig(settings, options: ["timeout: 100ms"]) { rig in
            let (veneer, port) = try await rig.start()
            defer { veneer.terminate() }
            try await eventually("the refresh is in flight") { rig.tokens.pending == 1 }
            try rig.breakStore()   // after the token was marked in flight, before its answer
            rig.tokens.release()
            try await eventually("health says: held in memory only") { await rig.problems(port).contains { $0.contains("held in memory only") } }
            #expect(try await rig.get(port).status == 200, "the new access token serves")
            try rig.restoreStore()
            veneer.signal(SIGTERM)
            #expect(await veneer.wait() == 0)
            #expect(rig.saved()?["refresh_token"] as? String == "rt-1")

            rig.refused.insert("at-1")
            try rig.configure()  // the default time-out: a loaded run took longer than 100 ms for this refresh (504)
            let (again, againPort) = try await rig.start()
            defer { again.terminate() }
            #expect(try await rig.get(againPort).status == 200)
            #expect(rig.tokens.presented == ["rt-0", "rt-1"])
            #expect(rig.tokens.reuses == 0)
        }
    }

    // MARK: 3. No temporary file holds a refresh token

    @Test("temporary files a crash left are removed at start, unread; a save leaves none")
    func leftovers() async throws {
        try await withFamilyRig { rig in
            var (veneer, port) = try await rig.start()
            #expect(try await rig.get(port).status == 200)
            veneer.signal(SIGKILL)
            _ = await veneer.wait()
            let name = try #require(try FileManager.default.contentsOfDirectory(atPath: rig.stateFolder).first { $0.hasSuffix(".json") })
            let stale = #"{"refresh_token":"rt-stale","origin":"x","generation":99}"#
            for leftover in [name + ".tmp", name + ".tmp-4242-1234567", name + ".tmp-4243-7654321"] {
                try stale.write(toFile: rig.stateFolder + "/" + leftover, atomically: false, encoding: .utf8)
            }
            rig.refused.insert("at-1")
            (veneer, port) = try await rig.start()
            defer { veneer.terminate() }
            #expect(try await rig.get(port).status == 200)
            #expect(try FileManager.default.contentsOfDirectory(atPath: rig.stateFolder) == [name])
            #expect(!rig.tokens.presented.contains("rt-stale"))
            #expect(rig.tokens.presented == ["rt-0", "rt-1"])
            #expect(veneer.stderr.contains("removed temporary token files"))
        }
    }

    // MARK: 4. The window

    @Test("killed while a refresh is in flight: the next start says the saved token was in flight, and a reuse grace period on the server saves the family")
    func inFlightAtKill() async throws {
        var settings = TestTokenServer.Settings()
        settings.delay = .seconds(2)
        settings.reuseGrace = .seconds(300)
        try await withFamilyRig(settings) { rig in
            var (veneer, port) = try await rig.start()
            try await eventually("the refresh is in flight") { rig.tokens.pending == 1 }
            veneer.signal(SIGKILL)
            _ = await veneer.wait()
            #expect(rig.saved()?["in_flight_since"] != nil)
            rig.tokens.update { $0.delay = .zero }
            (veneer, port) = try await rig.start()
            defer { veneer.terminate() }
            #expect(veneer.stderr.contains("the saved refresh token was in flight when Veneer last stopped"))
            #expect(try await rig.get(port).status == 200)
            #expect(rig.tokens.presented == ["rt-0", "rt-0"])
            #expect(rig.tokens.graceReuses == 1 && rig.tokens.reuses == 0)
            #expect(rig.saved()?["in_flight_since"] == nil)
        }
    }

    // MARK: 6. The loop wakes on every change

    @Test("after invalid_grant a new refresh token file is picked up within 2 s, however long the loop's schedule")
    func newTokenFile() async throws {
        var settings = TestTokenServer.Settings()
        settings.expiresIn = 3600
        try await withFamilyRig(settings) { rig in
            let (veneer, port) = try await rig.start()
            defer { veneer.terminate() }
            #expect(try await rig.get(port).status == 200)
            // Someone replays the first token: the server revokes the family.
            _ = try await RawHTTP.request(port: rig.tokens.port, "POST", "/oauth/token",
                                          headers: [("Authorization", "Basic " + Data("veneer:s3cret".utf8).base64EncodedString()),
                                                    ("Content-Type", "application/x-www-form-urlencoded")],
                                          body: "grant_type=refresh_token&refresh_token=rt-0")
            let refused = try await rig.get(port)
            #expect(refused.status == 401 && refused.errorCode == "unauthorized")
            try rig.provideNewToken("rt-new")
            let provided = ContinuousClock.now
            try await eventually("health is clear again") { await rig.problems(port).isEmpty }
            // The loop looks at the file every second, whatever its schedule.
            #expect(ContinuousClock.now - provided < .seconds(2))
            #expect(try await rig.get(port).status == 200)
            #expect(rig.tokens.presented.last == "rt-new")
        }
    }

    @Test("a reactive refresh that brings a token expiring sooner moves the proactive refresh forward")
    func reactiveReschedules() async throws {
        var settings = TestTokenServer.Settings()
        settings.expiresIn = 3600
        try await withFamilyRig(settings, options: ["refresh_before_expiry: 1s"]) { rig in
            let (veneer, port) = try await rig.start()
            defer { veneer.terminate() }
            #expect(try await rig.get(port).status == 200)
            rig.tokens.update { $0.expiresIn = 2 }
            rig.refused.insert("at-1")
            #expect(try await rig.get(port).status == 200, "refreshed after the 401 and retried")
            #expect(rig.tokens.refreshes == 2)
            // Due 1 s before the new token's expiry, without any request.
            try await eventually("the proactive refresh, moved forward") { rig.tokens.refreshes == 3 }
            #expect(rig.tokens.reuses == 0)
        }
    }
}
