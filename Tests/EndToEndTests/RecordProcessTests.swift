import Foundation
import Testing
import VeneerTestSupport

@Suite("record as a real process")
struct RecordProcessTests {
    @Test("veneer check accepts record; a running Veneer writes a valid HAR 1.2 file as requests pass, credentials redacted")
    func recordsHAR() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await withTestUpstream({ request in
            .json(#"{"id":1,"title":"t","body":"b","access_token":"UPSTREAM-SECRET"}"#,
                  headers: [("Set-Cookie", "sid=COOKIE-SECRET"), ("Cache-Control", "max-age=60")])
        }) { (upstream: TestUpstream) async throws in
            try """
            environments:
              development:
                origin: { upstream: { url: "\(upstream.url)" } }
                chain:
                  - record: { file: recordings/staging.har, max_body: 1KB }
            """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
            let check = try await VeneerProcess.run(["check", "--config", "veneer.yaml"], directory: directory)
            #expect(check.status == 0, "\(check.stderr)")
            let bad = directory + "/bad.yaml"
            try "environments: {development: {origin: {mock: {}}, chain: [{record: {file: x.json, max_bdy: 1KB}}]}}".write(toFile: bad, atomically: true, encoding: .utf8)
            let refused = try await VeneerProcess.run(["check", "--config", bad], directory: directory)
            #expect(refused.status == 78 && refused.stderr.contains("unknown key 'max_bdy' (did you mean 'max_body'?)") && refused.stderr.contains("must end in .har"), "\(refused.stderr)")

            let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
            defer { process.terminate() }
            let port = try await process.waitUntilReady()
            let file = directory + "/recordings/staging.har"
            for _ in 0..<2 {
                let response = try await RawHTTP.request(port: port, "GET", "/posts/1?access_token=QUERY-SECRET&v=2",
                                                         headers: [("Authorization", "Bearer CALLER-SECRET"), ("Cookie", "a=COOKIE-2")])
                #expect(response.status == 200)
            }
            let data = try #require(FileManager.default.contents(atPath: file))
            let har = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
            let log = try #require(har["log"] as? [String: Any])
            #expect(log["version"] as? String == "1.2")
            let entries = try #require(log["entries"] as? [[String: Any]])
            #expect(entries.count == 2)
            let text = String(decoding: data, as: UTF8.self)
            #expect(!text.contains("SECRET") && text.contains("v=2"))
            let mode = try #require(try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int)
            #expect(mode == 0o600)
        }
    }
}
