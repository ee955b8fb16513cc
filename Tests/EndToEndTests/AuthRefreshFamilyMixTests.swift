import Foundation
import Testing
import VeneerTestSupport

/// Two environments that configure different refresh tokens for one token endpoint, client
/// and store (issue 25 §2): whatever the path of switches, reloads and restarts, one family's
/// newest refresh token is never overwritten by the other's, so a server that revokes a family
/// on reuse never does so by Veneer's fault. The real binary, a real token endpoint.
@Suite("auth_refresh keeps token families apart across switches, reloads and restarts (the real binary)", .serialized)
struct AuthRefreshFamilyMixTests {
    struct Rig {
        let directory: String
        let tokens: TestTokenServer
        let upstream: TestUpstream
        /// Access tokens the upstream refuses with 401 (a refresh follows).
        let refused: RefusedTokens

        /// fa and fb share the endpoint, client and store (the state folder) with tokens of
        /// their own; fn has no auth_refresh. `extra` is appended to the environments.
        func configure(fa: String = "rt-0", fb: String = "rt-b", fn: String = "chain: []", extra: String = "") throws {
            func refreshing(_ token: String) -> String {
                "chain: [{ auth_refresh: { token_url: \"\(tokens.url)\", client_id: veneer, client_secret: s3cret, refresh_token: \(token) } }]"
            }
            try """
                state_dir: \(directory)/state
                environments:
                  fa:
                    origin: { upstream: { url: "\(upstream.url)" } }
                    \(refreshing(fa))
                  fb:
                    origin: { upstream: { url: "\(upstream.url)" } }
                    \(refreshing(fb))
                  fn:
                    origin: { upstream: { url: "\(upstream.url)" } }
                    \(fn.hasPrefix("rt-") ? refreshing(fn) : fn)
                \(extra)
                """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        }

        func start(_ environment: String) throws -> VeneerProcess {
            try VeneerProcess(["run", "--config", "veneer.yaml", "-e", environment, "--listen", "127.0.0.1:0"], directory: directory)
        }

        func switchTo(_ port: Int, _ environment: String) async throws -> RawResponse {
            try await RawHTTP.request(port: port, "POST", "/-/environment", headers: [("Content-Type", "application/json")],
                                      body: #"{"environment":"\#(environment)"}"#)
        }

        func serving(_ port: Int) async throws -> String? {
            try await RawHTTP.request(port: port, "GET", "/-/health").json?["environment"] as? String
        }

        func reload(_ port: Int) async throws -> RawResponse {
            try await RawHTTP.request(port: port, "POST", "/-/reload")
        }

        /// The upstream refuses the access token it saw last: the next request refreshes.
        func refuseAccessToken() {
            if let header = upstream.requests.last?.header("authorization") { refused.insert(String(header.dropFirst(7))) }
        }

        /// What the endpoint saw after the first refresh: one more refresh, with the token the
        /// first one rotated to, and no reuse.
        func expectFamilyContinued(sourceLocation: SourceLocation = #_sourceLocation) {
            let presented = tokens.presented
            #expect(presented.count == 2 && presented.first == "rt-0", "\(presented)", sourceLocation: sourceLocation)
            #expect(!presented.contains("rt-b"), sourceLocation: sourceLocation)
            #expect(presented.last.map { tokens.currentRefreshToken(inFamilyOf: $0) != $0 } == true, "rotated", sourceLocation: sourceLocation)
            #expect(tokens.reuses == 0 && !tokens.isRevoked("rt-0"), sourceLocation: sourceLocation)
        }
    }

    func withRig(_ body: (Rig) async throws -> Void) async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let tokens = try await TestTokenServer.start()
        tokens.issueNewFamily("rt-b")
        let refused = RefusedTokens()
        do {
            try await withTestUpstream({ request in
                if let header = request.header("authorization"), refused.contains(String(header.dropFirst(7))) {
                    return .json(#"{"error":"invalid_token"}"#, status: 401)
                }
                return tokens.protectedReply(request)
            }) { (upstream: TestUpstream) async throws in
                let rig = Rig(directory: directory, tokens: tokens, upstream: upstream, refused: refused)
                try rig.configure()
                try await body(rig)
            }
            await tokens.stop()
        } catch {
            await tokens.stop()
            throw error
        }
    }

    @Test("fa → fn → fb → fn → fa: the switch to fb is refused (422) because the store holds fa's family; back on fa its newest token is presented, nothing is revoked")
    func throughAnEnvironmentWithoutAuthRefresh() async throws {
        try await withRig { rig in
            let veneer = try rig.start("fa")
            defer { veneer.terminate() }
            let port = try await veneer.waitUntilReady()
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").status == 200)
            #expect(rig.tokens.presented == ["rt-0"])

            #expect(try await rig.switchTo(port, "fn").status == 200)
            let refused = try await rig.switchTo(port, "fb")
            #expect(refused.status == 422, "\(refused.text)")
            #expect(refused.text.contains("holds the token family of environment fa"), "\(refused.text)")
            #expect(try await rig.serving(port) == "fn", "nothing changed")
            #expect(rig.tokens.presented == ["rt-0"], "fb sent nothing, and its token overwrote nothing")

            #expect(try await rig.switchTo(port, "fn").status == 200)
            #expect(try await rig.switchTo(port, "fa").status == 200)
            // fa's manager is a new one: it reads the store, where fa's rotation still is. The
            // upstream refuses the saved access token, so a refresh follows at once.
            rig.refuseAccessToken()
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").status == 200)
            rig.expectFamilyContinued()
        }
    }

    @Test("reloads: an environment that gains another token for the shared store is refused; fa's operator replacing fa's token is taken, and the replaced token is refused from then on")
    func reloads() async throws {
        try await withRig { rig in
            let veneer = try rig.start("fa")
            defer { veneer.terminate() }
            let port = try await veneer.waitUntilReady()
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").status == 200)
            #expect(try await rig.switchTo(port, "fn").status == 200)

            // fn, serving, is edited to refresh with fb's token through the same store.
            try rig.configure(fn: "rt-b")
            let refused = try await rig.reload(port)
            #expect(refused.status == 422, "\(refused.text)")
            #expect(refused.text.contains("holds the token family of environment fa"), "\(refused.text)")
            #expect(rig.tokens.presented == ["rt-0"])

            // fa's operator provides a new refresh token: a deliberate new family.
            rig.tokens.issueNewFamily("rt-new")
            try rig.configure(fa: "rt-new")
            #expect(try await rig.switchTo(port, "fa").status == 200)
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").status == 200)
            #expect(rig.tokens.presented.last == "rt-new")

            // A stale copy of the old configuration comes back: the replaced token is refused.
            try rig.configure(fa: "rt-0")
            let stale = try await rig.reload(port)
            #expect(stale.status == 422, "\(stale.text)")
            #expect(stale.text.contains("was replaced"), "\(stale.text)")
            #expect(rig.tokens.presented.filter { $0 == "rt-0" }.count == 1, "the replaced token is never presented again")
            #expect(rig.tokens.reuses == 0)
        }
    }

    @Test("restarts: a start of fb on the store fa left exits 78 with the reason and sends nothing; fa started again goes on with its family")
    func restarts() async throws {
        try await withRig { rig in
            var veneer = try rig.start("fa")
            var port = try await veneer.waitUntilReady()
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").status == 200)
            veneer.signal(SIGTERM)
            #expect(await veneer.wait() == 0)

            let other = try rig.start("fb")
            #expect(await other.wait() == 78, "\(other.stderr)")
            #expect(other.stderr.contains("holds the token family of environment fa"), "\(other.stderr)")
            #expect(rig.tokens.presented == ["rt-0"])

            veneer = try rig.start("fa")
            defer { veneer.terminate() }
            port = try await veneer.waitUntilReady()
            _ = try await RawHTTP.request(port: port, "GET", "/posts/1")
            rig.refuseAccessToken()
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").status == 200)
            rig.expectFamilyContinued()
        }
    }
}
