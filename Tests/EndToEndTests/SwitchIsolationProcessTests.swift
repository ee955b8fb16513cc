import Foundation
import Testing
import VeneerTestSupport

/// What a switch must not carry from one environment to another (found by an attack review).
@Suite("switching keeps environments apart")
struct SwitchIsolationProcessTests {
    static func post(_ port: Int, _ environment: String) async throws -> RawResponse {
        try await RawHTTP.request(port: port, "POST", "/-/environment", headers: [("Content-Type", "application/json")],
                                  body: #"{"environment":"\#(environment)"}"#)
    }

    @Test("a cache with the same options over another upstream starts empty after a switch; over the same upstream it stays warm")
    func cacheFollowsItsOrigin() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await withTestUpstream({ _ in .json(#"{"id":1,"title":"from A","body":"b"}"#) }) { (a: TestUpstream) async throws in
            try await withTestUpstream({ _ in .json(#"{"id":1,"title":"from B","body":"b"}"#) }) { (b: TestUpstream) async throws in
                try """
                environments:
                  a:
                    origin: { upstream: { url: "\(a.url)" } }
                    chain: [{ cache: { ttl: 1h } }]
                  a2:
                    origin: { upstream: { url: "\(a.url)" } }
                    chain: [{ cache: { ttl: 1h } }]
                  b:
                    origin: { upstream: { url: "\(b.url)" } }
                    chain: [{ cache: { ttl: 1h } }]
                """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
                let process = try VeneerProcess(["run", "--config", "veneer.yaml", "-e", "a", "--listen", "127.0.0.1:0"], directory: directory)
                defer { process.terminate() }
                let port = try await process.waitUntilReady()
                #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").text.contains("from A"))

                #expect(try await Self.post(port, "a2").status == 200)
                let warm = try await RawHTTP.request(port: port, "GET", "/posts/1")
                #expect(warm.text.contains("from A") && warm.header("Cache-Status")?.contains("hit") == true, "same upstream: warm")

                #expect(try await Self.post(port, "b").status == 200)
                let other = try await RawHTTP.request(port: port, "GET", "/posts/1")
                #expect(other.text.contains("from B"), "another upstream is never answered from A's entries")
                #expect(b.count == 1)
            }
        }
    }

    @Test("a switch between environments that hold different refresh tokens for one token endpoint, client and store is refused (422), nothing changes; the same refresh token switches")
    func tokenFamiliesNotMixed() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let tokens = try await TestTokenServer.start()
        defer { Task { await tokens.stop() } }
        try await withTestUpstream({ request in tokens.protectedReply(request) }) { (upstream: TestUpstream) async throws in
            try """
            state_dir: \(directory)/state
            environments:
              a:
                origin: { upstream: { url: "\(upstream.url)" } }
                chain:
                  - auth_refresh: { token_url: "\(tokens.url)", client_id: veneer, client_secret: s3cret, refresh_token: rt-0 }
              same:
                origin: { upstream: { url: "\(upstream.url)" } }
                chain:
                  - latency_log
                  - auth_refresh: { token_url: "\(tokens.url)", client_id: veneer, client_secret: s3cret, refresh_token: rt-0 }
              other:
                origin: { upstream: { url: "\(upstream.url)" } }
                chain:
                  - auth_refresh: { token_url: "\(tokens.url)", client_id: veneer, client_secret: s3cret, refresh_token: rt-other }
            """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
            let process = try VeneerProcess(["run", "--config", "veneer.yaml", "-e", "a", "--listen", "127.0.0.1:0"], directory: directory)
            defer { process.terminate() }
            let port = try await process.waitUntilReady()
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").status == 200)

            let refused = try await Self.post(port, "other")
            #expect(refused.status == 422)
            #expect(refused.text.contains("mix the two token families"), "\(refused.text)")
            #expect(try await RawHTTP.request(port: port, "GET", "/-/health").json?["environment"] as? String == "a")
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").status == 200)

            #expect(try await Self.post(port, "same").status == 200, "the same grant: the token state carries over")
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").status == 200)
        }
    }
}
