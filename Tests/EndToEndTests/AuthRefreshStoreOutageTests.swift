import Foundation
import Testing
import VeneerTestSupport

@Suite("auth_refresh with its token in PostgreSQL (the real binary)", .serialized)
struct AuthRefreshStoreOutageTests {
    @Test("a PostgreSQL outage never grows the token endpoint's backoff, and the store's recovery brings the token back at once")
    func outage() async throws {
        let postgres = try await TestPostgres.start()
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "rt-0\n".write(toFile: directory + "/refresh-token", atomically: true, encoding: .utf8)
        try "s3cret".write(toFile: directory + "/client-secret", atomically: true, encoding: .utf8)
        var settings = TestTokenServer.Settings()
        settings.expiresIn = 2
        let tokens = try await TestTokenServer.start(settings: settings)
        do {
            try await withTestUpstream({ request in tokens.protectedReply(request) }) { (upstream: TestUpstream) async throws in
                try """
                    state_dir: \(directory)/state
                    stores:
                      shared: { postgres: { url: "\(postgres.url)", password_file: \(postgres.passwordFile) } }
                    environments:
                      development:
                        origin: { upstream: { url: "\(upstream.url)" } }
                        chain:
                          - auth_refresh:
                              token_url: \(tokens.url)
                              client_id: veneer
                              client_secret_file: \(directory)/client-secret
                              refresh_token_file: \(directory)/refresh-token
                              refresh_before_expiry: 1s
                              store: shared
                    """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
                let veneer = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
                defer { veneer.terminate() }
                let port = try await veneer.waitUntilReady()
                func problems() async -> [String] {
                    (try? await RawHTTP.request(port: port, "GET", "/-/health").json?["problems"] as? [String]) ?? []
                }
                try await eventually("health is clear") { await problems().isEmpty }
                #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").status == 200)

                try await postgres.stop(immediate: true)
                // Ten seconds of callers asking while the token expires and cannot be refreshed.
                let outage = ContinuousClock.now
                var endpointBlamed = false
                while ContinuousClock.now - outage < .seconds(10) {
                    _ = try await RawHTTP.request(port: port, "GET", "/posts/1")
                    // The endpoint's backoff shows as "(N failures)": the store's outage must not count.
                    let counted = await problems().contains { $0.contains("token endpoint") || $0.range(of: #"\(\d+ failures?\)"#, options: .regularExpression) != nil }
                    if counted { endpointBlamed = true }
                    // Deliberate: callers every 200 ms through the whole outage.
                    try await Task.sleep(for: .milliseconds(200))
                }
                #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").status == 502)
                #expect(!endpointBlamed, "the store's outage is not the token endpoint's failure, and grows no backoff")

                try await postgres.restart()
                try await eventually("the store is back") { await !problems().contains { $0.hasPrefix("store shared") } }
                let storeBack = ContinuousClock.now
                try await eventually("a request is served") { (try? await RawHTTP.request(port: port, "GET", "/posts/1").status) == 200 }
                let recovery = ContinuousClock.now - storeBack
                // At once (the store's resync wakes the manager); 5 s leaves a loaded run slack and is
                // still far below the backoff an outage counted as the endpoint's failures would grow.
                #expect(recovery < .seconds(5), "served \(recovery) after the store recovered")
                #expect(tokens.reuses == 0)
            }
        } catch {
            Issue.record(error)
        }
        await tokens.stop()
        await postgres.destroy()
    }
}
