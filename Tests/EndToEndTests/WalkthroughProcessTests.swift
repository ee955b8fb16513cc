import Foundation
import Testing
import VeneerTestSupport

/// The README's walkthrough, run as it is written: its YAML block read from README.md, its
/// commands run against the real binary (only the listen port is picked by the test).
@Suite("the README walkthrough")
struct WalkthroughProcessTests {
    /// The YAML block of the section `## Walkthrough`.
    static func walkthroughConfig() throws -> String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let section = try #require(readme.range(of: "## Walkthrough"))
        let rest = readme[section.upperBound...]
        let start = try #require(rest.range(of: "```yaml\n"))
        let end = try #require(rest[start.upperBound...].range(of: "```"))
        return String(rest[start.upperBound..<end.lowerBound])
    }

    @Test("record staging, switch offline and replay it, break one route, watch it on /-/status and in Server-Timing, switch back to staging")
    func walkthrough() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory + "/config", withIntermediateDirectories: true)
        try Self.walkthroughConfig().write(toFile: directory + "/config/veneer.yaml", atomically: true, encoding: .utf8)
        try await withTestUpstream({ request in
            switch (request.method, request.target) {
            case ("GET", "/posts/1"): return .json(#"{"id":1,"title":"recorded","body":"b"}"#)
            case ("GET", let target) where target.hasPrefix("/posts?"): return .json(#"[{"id":1,"title":"recorded","body":"b"}]"#)
            default: return .json(#"{"error":"not_found"}"#, status: 404)
            }
        }) { (upstream: TestUpstream) async throws in
            let process = try VeneerProcess(["run", "-e", "staging", "--listen", "127.0.0.1:0"], directory: directory,
                                            environment: ["STAGING_URL": upstream.url])
            defer { process.terminate() }
            let port = try await process.waitUntilReady()
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").text.contains("recorded"))
            #expect(try await RawHTTP.request(port: port, "GET", "/posts?userId=1").status == 200)
            #expect(upstream.count == 2)

            let offline = try await VeneerProcess.run(["switch", "offline", "-e", "staging"], directory: directory)
            #expect(offline.status == 0, "\(offline.stdout)\(offline.stderr)")
            let replayed = try await RawHTTP.request(port: port, "GET", "/posts/1")
            #expect(replayed.status == 200 && replayed.text.contains("recorded"))
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/2").errorCode == "not_found")
            #expect(upstream.count == 2, "nothing reaches staging")

            let deleted = try await RawHTTP.request(port: port, "DELETE", "/posts/1")
            #expect(deleted.status == 503 && deleted.errorCode == "fault_injected")
            #expect(deleted.header("Server-Timing")?.contains(#"fault;desc="abort 503""#) == true)
            let asked = try await RawHTTP.request(port: port, "GET", "/posts?userId=1", headers: [("Veneer-Fault", "status=503")])
            #expect(asked.status == 503 && asked.errorCode == "fault_injected")
            let hit = try await RawHTTP.request(port: port, "GET", "/posts/1", headers: [("Veneer-Fault", "drop")])
            #expect(hit.status == 200 && hit.header("Cache-Status")?.contains("hit") == true, "a fresh hit never reaches the fault")

            let status = try await RawHTTP.request(port: port, "GET", "/-/status")
            let chain = status.json?["chain"] as? [[String: Any]] ?? []
            #expect(chain.compactMap { $0["name"] as? String } == ["latency_log", "cache", "fault", "replay"])
            #expect((chain.first { $0["name"] as? String == "fault" }?["figures"] as? [String: Any])?["aborted"] as? Int == 2)
            let requests = status.json?["requests"] as? [[String: Any]] ?? []
            #expect(requests.compactMap { $0["path"] as? String } == ["/posts/1", "/posts?…", "/posts/1", "/posts/2", "/posts/1", "/posts?…", "/posts/1"])
            #expect(requests.compactMap { $0["status"] as? Int } == [200, 200, 200, 404, 503, 503, 200])

            let back = try await VeneerProcess.run(["switch", "staging", "-e", "offline"], directory: directory)
            #expect(back.status == 0, "\(back.stdout)\(back.stderr)")
            #expect(try await RawHTTP.request(port: port, "GET", "/-/health").json?["environment"] as? String == "staging")
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").status == 200)
            #expect(upstream.count == 3, "staging again")
        }
    }
}
