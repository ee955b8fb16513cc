import Foundation
import Testing
import VeneerTestSupport

@Suite("trace and Server-Timing in the real binary")
struct TraceProcessTests {
    /// Whether `value` is exactly `pattern`, where `#` stands for a duration (`12.3`).
    func matches(_ value: String?, _ pattern: String) -> Bool {
        guard let value else { return false }
        let escaped = NSRegularExpression.escapedPattern(for: pattern).replacingOccurrences(of: "#", with: "[0-9]+\\.[0-9]")
        return value.range(of: "^" + escaped + "$", options: .regularExpression) != nil
    }

    /// The JSON lines of a file (the access log).
    func fileLines(_ path: String) -> [[String: Any]] {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    @Test("latency_log -> cache -> auth_refresh -> upstream: each decision in order, the upstream's time; a hit carries its own timing, never the stored miss's; the upstream's own Server-Timing is kept on the miss")
    func chain() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "rt-0\n".write(toFile: directory + "/refresh-token", atomically: true, encoding: .utf8)
        try "s3cret".write(toFile: directory + "/client-secret", atomically: true, encoding: .utf8)
        let tokens = try await TestTokenServer.start()
        defer { Task { await tokens.stop() } }
        try await withTestUpstream({ request in
            var reply = tokens.protectedReply(request)
            reply.headers += [("Cache-Control", "max-age=60"), ("Server-Timing", #"db;desc="posts";dur=5"#)]
            return reply
        }) { (upstream: TestUpstream) async throws in
            try """
                state_dir: \(directory)/state
                environments:
                  development:
                    trace: true
                    origin: { upstream: { url: "\(upstream.url)" } }
                    chain:
                      - latency_log
                      - cache
                      - auth_refresh:
                          token_url: \(tokens.url)
                          client_id: veneer
                          client_secret_file: \(directory)/client-secret
                          refresh_token_file: \(directory)/refresh-token
                """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
            let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
            defer { process.terminate() }
            let port = try await process.waitUntilReady()

            let miss = try await RawHTTP.request(port: port, "GET", "/posts/1")
            #expect(miss.status == 200)
            let missTiming = miss.headers("server-timing")
            #expect(missTiming.count == 2 && missTiming.first == #"db;desc="posts";dur=5"#, "the upstream's own first, as it came: \(missTiming)")
            // The first token is refreshed for this request, or just before it by the refresh loop.
            #expect((missTiming.last ?? "").range(of: #"^latency_log;dur=[0-9]+\.[0-9], cache;desc="miss stored", "#
                + #"auth_refresh;desc="(refreshed|token [0-9]+s left)", upstream;dur=[0-9]+\.[0-9]$"#, options: .regularExpression) != nil,
                    "\(missTiming)")

            let hit = try await RawHTTP.request(port: port, "GET", "/posts/1")
            #expect(hit.status == 200 && hit.header("cache-status")?.contains("hit") == true)
            #expect(hit.headers("server-timing").count == 1, "nothing of the miss was stored: \(hit.headers("server-timing"))")
            #expect(matches(hit.header("server-timing"), #"latency_log;dur=#, cache;desc="hit""#), "\(hit.headers("server-timing"))")

            let second = try await RawHTTP.request(port: port, "GET", "/posts/2")
            let timing = second.headers("server-timing").last ?? ""
            #expect(timing.range(of: #"^latency_log;dur=[0-9.]+, cache;desc="miss stored", auth_refresh;desc="token [0-9]+s left", upstream;dur=[0-9.]+$"#,
                                 options: .regularExpression) != nil, "\(timing)")

            // Refused by the edge and the admin API: not through the chain, no Server-Timing.
            let refused = try await RawHTTP.request(port: port, "GET", "/nothing")
            #expect(refused.status == 404 && refused.header("server-timing") == nil)
            let health = try await RawHTTP.request(port: port, "GET", "/-/health")
            #expect(health.status == 200 && health.header("server-timing") == nil)
        }
    }

    @Test("trace off: no Server-Timing; a reload turns it on for the next request, and off again; at debug level the access log line carries the entries either way")
    func reload() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let yaml = { (trace: Bool) in
            "environments: {development: {trace: \(trace), access_log: access.log, origin: {mock: {}}, chain: [cache]}}"
        }
        try yaml(false).write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0", "--log-level", "debug"], directory: directory)
        defer { process.terminate() }
        let port = try await process.waitUntilReady()

        let off = try await RawHTTP.request(port: port, "GET", "/posts")
        #expect(off.status == 200 && off.header("server-timing") == nil)

        try yaml(true).write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        process.signal(SIGHUP)
        try await eventually("the reload turned trace on") { (try? await RawHTTP.request(port: port, "GET", "/posts/99").header("server-timing")) != nil }
        let on = try await RawHTTP.request(port: port, "GET", "/posts")
        #expect(matches(on.header("server-timing"), #"cache;desc="hit""#), "\(on.headers("server-timing"))")
        let created = try await RawHTTP.request(port: port, "POST", "/posts", body: #"{"title":"t","body":"b"}"#)
        #expect(created.status == 201 && matches(created.header("server-timing"), #"cache;desc="passed stored", mock;dur=#"#),
                "\(created.headers("server-timing"))")

        try yaml(false).write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        process.signal(SIGHUP)
        try await eventually("the reload turned trace off") { (try? await RawHTTP.request(port: port, "GET", "/posts/99").header("server-timing")) == nil }
        #expect(try await RawHTTP.request(port: port, "GET", "/posts").header("server-timing") == nil)

        process.signal(SIGTERM)
        #expect(await process.wait() == 0)
        let lines = fileLines(directory + "/access.log").filter { $0["url.path"] as? String == "/posts" }
        let first = try #require(lines.first?["trace"] as? [[String: Any]], "debug level: the entries, trace on or off")
        #expect(first.count == 2 && first[0]["name"] as? String == "cache" && first[0]["desc"] as? String == "miss stored")
        #expect(first[1]["name"] as? String == "mock" && first[1]["dur_ms"] is Double && first[1]["desc"] == nil)
        #expect(lines.allSatisfy { $0["trace"] != nil })
    }

    @Test("a fault abort is a decision of its own, with no upstream entry; 4xx from the chain carry Server-Timing; at info level the access log has no entries")
    func fault() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await withTestUpstream({ _ in .json(#"{"id":1,"title":"t","body":"b"}"#) }) { (upstream: TestUpstream) async throws in
            try """
                environments:
                  development:
                    trace: true
                    access_log: access.log
                    origin: { upstream: { url: "\(upstream.url)" } }
                    chain:
                      - latency_log
                      - block_list: { deny: { methods: [PUT] } }
                      - fault: { abort: { status: 503, methods: [DELETE] } }
                """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
            let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
            defer { process.terminate() }
            let port = try await process.waitUntilReady()

            let aborted = try await RawHTTP.request(port: port, "DELETE", "/posts/1")
            #expect(aborted.status == 503 && matches(aborted.header("server-timing"), #"latency_log;dur=#, fault;desc="abort 503""#),
                    "\(aborted.headers("server-timing"))")
            let blocked = try await RawHTTP.request(port: port, "PUT", "/posts/1", body: #"{"title":"t","body":"b"}"#)
            #expect(blocked.status == 403 && matches(blocked.header("server-timing"), #"latency_log;dur=#, block_list;desc="blocked""#),
                    "\(blocked.headers("server-timing"))")
            let passed = try await RawHTTP.request(port: port, "GET", "/posts/1")
            #expect(matches(passed.header("server-timing"), "latency_log;dur=#, upstream;dur=#"), "\(passed.headers("server-timing"))")
            #expect(upstream.requests.count == 1, "neither the abort nor the block reached the upstream")

            process.signal(SIGTERM)
            #expect(await process.wait() == 0)
            let lines = fileLines(directory + "/access.log")
            #expect(lines.count == 3 && lines.allSatisfy { $0["trace"] == nil }, "info level: \(lines)")
        }
    }
}
