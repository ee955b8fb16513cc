import Foundation
import Testing
import VeneerTestSupport

@Suite("auth_refresh as a real process")
struct AuthRefreshProcessTests {
    @Test("a rotated refresh token survives kill -9; tokens and secrets never reach logs or chain output")
    func persistence() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "rt-0\n".write(toFile: directory + "/refresh-token", atomically: true, encoding: .utf8)
        try "s3cret".write(toFile: directory + "/client-secret", atomically: true, encoding: .utf8)
        let tokens = try await TestTokenServer.start()
        defer { Task { await tokens.stop() } }
        // Access tokens the upstream refuses whatever their expiry: the restarted process must refresh.
        let refused = RefusedTokens()
        try await withTestUpstream({ request in
            if let header = request.header("authorization"), refused.contains(String(header.dropFirst(7))) {
                return .json(#"{"error":"invalid_token"}"#, status: 401)
            }
            return tokens.protectedReply(request)
        }) { (upstream: TestUpstream) async throws in
            try """
                state_dir: \(directory)/state
                environments:
                  development:
                    origin: { upstream: { url: "\(upstream.url)" } }
                    chain:
                      - latency_log
                      - auth_refresh:
                          token_url: \(tokens.url)
                          client_id: veneer
                          client_secret_file: \(directory)/client-secret
                          refresh_token_file: \(directory)/refresh-token
                  inline:
                    extends: development
                    chain:
                      - auth_refresh: { token_url: "\(tokens.url)", client_id: veneer, client_secret: s3cret, refresh_token: rt-0 }
                """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
            var logs = ""
            let arguments = ["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0", "--log-level", "trace"]

            let first = try VeneerProcess(arguments, directory: directory)
            let firstPort = try await first.waitUntilReady()
            let ok = try await RawHTTP.request(port: firstPort, "GET", "/posts/1", headers: [("Authorization", "Bearer CALLERTOKEN")])
            #expect(ok.status == 200)
            #expect(tokens.forms.map { $0["refresh_token"] } == ["rt-0"])
            first.signal(SIGKILL)
            _ = await first.wait()
            logs += first.stdout + first.stderr

            // The saved access token is refused from now on: the restarted process must refresh.
            refused.insert("at-1")
            let second = try VeneerProcess(arguments, directory: directory)
            defer { second.terminate() }
            let secondPort = try await second.waitUntilReady()
            #expect(try await RawHTTP.request(port: secondPort, "GET", "/posts/1").status == 200)
            #expect(tokens.forms.first?["refresh_token"] == "rt-0")
            #expect(tokens.forms.dropFirst().first?["refresh_token"] == "rt-1", "the restart started from the rotated token")
            #expect(tokens.reuses == 0)
            _ = try await RawHTTP.request(port: secondPort, "GET", "/-/chain")
            second.signal(SIGTERM)
            #expect(await second.wait() == 0)
            logs += second.stdout + second.stderr

            let chain = try await VeneerProcess.run(["chain", "-e", "inline", "--config", "veneer.yaml", "--json"], directory: directory)
            #expect(chain.status == 0)
            logs += chain.stdout + chain.stderr
            #expect(logs.contains("access token refreshed"))
            for secret in ["rt-0", "rt-1", "rt-2", "at-1", "at-2", "s3cret", "CALLERTOKEN"] {
                #expect(!logs.contains(secret), "\(secret) appeared in the output")
            }
        }
    }
}
