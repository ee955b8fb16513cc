import Foundation
import Testing
import VeneerTestSupport

/// `Cache-Status` on every answer that went through a cache, Veneer's own errors included;
/// `Age` on exactly those made from a stored response (README, cache: Headers).
@Suite("Cache-Status and Age, as the README says, in the real binary")
struct CacheStatusProcessTests {
    @Test("Veneer's own errors behind a cache (502, a fault's drop, replay's 404, a write's 502) carry Cache-Status and no Age; the access log has it too")
    func ownErrors() async throws {
        try await withRefusingPort { (refusing: Int) async throws in
            let directory = try temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            try #"{"log":{"version":"1.2","creator":{"name":"t","version":"1"},"entries":[]}}"#
                .write(toFile: directory + "/empty.har", atomically: true, encoding: .utf8)
            try """
            environments:
              development:
                access_log: \(directory)/access.log
                origin: { upstream: { url: "http://127.0.0.1:\(refusing)", connect_timeout: 1s } }
                chain: [{ cache: { ttl: 1h } }, { fault: { allow_header: true } }]
              offline:
                origin: { replay: { file: empty.har } }
                chain: [{ cache: { ttl: 1h } }]
            """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
            let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
            defer { process.terminate() }
            let port = try await process.waitUntilReady()

            let unreachable = try await RawHTTP.request(port: port, "GET", "/posts/1")
            #expect(unreachable.status == 502)
            #expect(unreachable.header("Cache-Status") == "veneer; fwd=uri-miss; fwd-status=502")
            #expect(unreachable.header("Age") == nil, "nothing stored answered it")
            let dropped = try await RawHTTP.request(port: port, "GET", "/posts/2", headers: [("Veneer-Fault", "drop")])
            #expect(dropped.status == 502 && dropped.header("Cache-Status") == "veneer; fwd=uri-miss; fwd-status=502")
            #expect(dropped.header("Age") == nil)
            let write = try await RawHTTP.request(port: port, "DELETE", "/posts/1")
            #expect(write.status == 502 && write.header("Cache-Status") == "veneer; fwd=request")
            #expect(write.header("Age") == nil)
            let withBody = try await RawHTTP.request(port: port, "GET", "/posts/3", body: "x")
            #expect(withBody.status == 502 && withBody.header("Cache-Status") == "veneer; fwd=bypass; detail=request-body")

            let switched = try await RawHTTP.request(port: port, "POST", "/-/environment", body: #"{"environment":"offline"}"#)
            #expect(switched.status == 200, "\(switched.text)")
            let missing = try await RawHTTP.request(port: port, "GET", "/posts/2")
            #expect(missing.status == 404 && missing.errorCode == "not_found")
            #expect(missing.header("Cache-Status") == "veneer; fwd=uri-miss; fwd-status=404")
            #expect(missing.header("Age") == nil)

            process.signal(SIGTERM)
            #expect(await process.wait() == 0)
            let lines = try String(contentsOfFile: directory + "/access.log", encoding: .utf8).split(separator: "\n")
            #expect(lines.contains { $0.contains(#""http.response.status_code":502"#) && $0.contains(#""cache_status":"veneer; fwd=uri-miss; fwd-status=502""#) },
                    "\(lines)")
        }
    }

    @Test("Age on answers made from a stored response (a stored miss, a hit); a miss not stored and a write carry the upstream's own Age or none")
    func age() async throws {
        try await withTestUpstream({ request in
            if request.method == "PUT" { return .json(#"{"status":"ok"}"#) }
            switch request.target {
            case "/posts/1": return .json(#"{"id":1,"title":"t","body":"b"}"#, headers: [("Cache-Control", "max-age=60")])
            case "/posts/2": return .json(#"{"id":2,"title":"t","body":"b"}"#, headers: [("Cache-Control", "no-store")])
            case "/posts/3": return .json(#"{"id":3,"title":"t","body":"b"}"#, headers: [("Cache-Control", "no-store"), ("Age", "7")])
            default: return .json(#"{"status":"ok"}"#)
            }
        }) { (upstream: TestUpstream) async throws in
            let directory = try temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            try """
            environments:
              development:
                origin: { upstream: { url: "\(upstream.url)" } }
                chain: [{ cache: { ttl: 1h } }]
            """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
            let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
            defer { process.terminate() }
            let port = try await process.waitUntilReady()
            let stored = try await RawHTTP.request(port: port, "GET", "/posts/1")
            // Age from the upstream's Date, whole seconds: a loaded run that crosses a second says 1.
            #expect(stored.header("Cache-Status") == "veneer; fwd=uri-miss; fwd-status=200; stored"
                    && stored.header("Age").flatMap { Int($0) }.map { (0...2).contains($0) } == true, "Age: \(stored.header("Age") ?? "none")")
            let hit = try await RawHTTP.request(port: port, "GET", "/posts/1")
            #expect(hit.header("Cache-Status")?.hasPrefix("veneer; hit") == true && hit.header("Age") != nil)
            let notStored = try await RawHTTP.request(port: port, "GET", "/posts/2")
            #expect(notStored.header("Cache-Status") == "veneer; fwd=uri-miss; fwd-status=200" && notStored.header("Age") == nil)
            let upstreamAge = try await RawHTTP.request(port: port, "GET", "/posts/3")
            #expect(upstreamAge.header("Age") == "7", "the upstream's own, passed on")
            let write = try await RawHTTP.request(port: port, "PUT", "/posts/1", body: #"{"title":"t","body":"b"}"#)
            #expect(write.header("Cache-Status") == "veneer; fwd=request" && write.header("Age") == nil)
            process.signal(SIGTERM)
            #expect(await process.wait() == 0)
        }
    }
}
