import Foundation
import Testing
import VeneerConfig
import VeneerCore
import VeneerRuntime
import VeneerTestSupport

/// `promtool` (Debian package `prometheus`), when installed.
enum Promtool {
    static let path: String? = ["/usr/bin/promtool", "/usr/local/bin/promtool"].first { FileManager.default.isExecutableFile(atPath: $0) }

    /// `promtool check metrics` on `text`: its exit status and what it said.
    static func check(_ text: String) async throws -> (status: Int32, output: String) {
        try await ChildProcess.run(path!, ["check", "metrics"], input: text)
    }
}

/// The value of the sample `series` (`name{labels}` exactly as exposed) in `text`.
func sample(_ text: String, _ series: String) -> Double? {
    for line in text.split(separator: "\n") where line.hasPrefix(series + " ") {
        return Double(line.dropFirst(series.count + 1))
    }
    return nil
}

/// The value of the one sample of family `name` whose labels contain `label` (e.g. `result="granted"`).
func sample(_ text: String, family name: String, with label: String = "") -> Double? {
    for line in text.split(separator: "\n") where line.hasPrefix(name + "{") || line.hasPrefix(name + " ") {
        guard let space = line.lastIndex(of: " "), label.isEmpty || line[..<space].contains(label) else { continue }
        return Double(line[line.index(after: space)...])
    }
    return nil
}

@Suite("Metrics on /-/metrics")
struct MetricsTests {
    /// A chain with every kind of metric in front of a real upstream, after a few requests.
    func exposition() async throws -> String {
        try await withTestUpstream({ _ in .json(#"{"id":1,"title":"t","body":"b"}"#, headers: [("Cache-Control", "max-age=60")]) }) { upstream in
            let yaml = """
                environments:
                  development:
                    origin: { upstream: { url: "\(upstream.url)" } }
                    chain: [latency_log, { cache: { ttl: 1m } }]
                """
            return try await withVeneer(yaml: yaml) { (veneer: RunningVeneer) async throws -> String in
                #expect(try await veneer.request("GET", "/posts/1").status == 200)
                #expect(try await veneer.request("GET", "/posts/1").status == 200)
                #expect(try await veneer.request("GET", "/nope").status == 404)
                #expect(try await veneer.request("PATCH", "/posts").status == 405)
                return try await veneer.request("GET", "/-/metrics").text
            }
        }
    }

    @Test("every family has # HELP and # TYPE")
    func helpAndType() async throws {
        let text = try await exposition()
        let lines = text.split(separator: "\n")
        let families = Set(lines.filter { $0.hasPrefix("# TYPE ") }.map { $0.split(separator: " ")[2] })
        let described = Set(lines.filter { $0.hasPrefix("# HELP ") }.map { $0.split(separator: " ")[2] })
        #expect(families.count >= 10)
        #expect(families == described)
        for family in ["veneer_http_requests_total", "veneer_http_requests_in_flight", "veneer_build_info", "veneer_config_last_reload_successful",
                       "veneer_config_last_reload_success_timestamp_seconds", "veneer_upstream_request_duration_seconds",
                       "veneer_request_duration_seconds", "veneer_cache_requests_total"] {
            #expect(families.contains(Substring(family)), "\(family)")
        }
        #expect(!text.contains("Veneer metric veneer_"), "every family has its own help text in the catalog")
    }

    @Test("promtool check metrics passes on a live instance's /-/metrics",
          .enabled(if: Promtool.path != nil, "promtool is not installed (Debian package prometheus; make test-deps installs it)"))
    func promtoolClean() async throws {
        let text = try await exposition()
        let (status, output) = try await Promtool.check(text)
        #expect(status == 0 && output.isEmpty, "\(output)")
    }

    @Test("veneer_http_requests_total counts every answer by route, method and status, refusals included")
    func requestsByRoute() async throws {
        try await withVeneer(yaml: "environments: {development: {origin: {mock: {}}}}") { (veneer: RunningVeneer) async throws in
            #expect(try await veneer.request("GET", "/posts").status == 200)
            #expect(try await veneer.request("GET", "/posts").status == 200)
            #expect(try await veneer.request("GET", "/nope/7").status == 404)
            #expect(try await veneer.request("PATCH", "/posts").status == 405)
            #expect(try await veneer.request("BREW", "/posts").status == 405)
            #expect(try await RawHTTP.send(port: veneer.port, Array("GARBAGE\r\n\r\n".utf8)).status == 400)
            let text = try await veneer.request("GET", "/-/metrics").text
            #expect(sample(text, #"veneer_http_requests_total{route="/posts",method="GET",status="200"}"#) == 2)
            #expect(sample(text, #"veneer_http_requests_total{route="unmatched",method="GET",status="404"}"#) == 1)
            #expect(sample(text, #"veneer_http_requests_total{route="/posts",method="PATCH",status="405"}"#) == 1)
            #expect(sample(text, #"veneer_http_requests_total{route="/posts",method="_OTHER",status="405"}"#) == 1, "no label per made-up method")
            #expect(sample(text, #"veneer_http_requests_total{route="unmatched",method="none",status="400"}"#) == 1)
            // The metrics request itself is the one in flight.
            #expect(sample(text, "veneer_http_requests_in_flight") == 1)
            let again = try await veneer.request("GET", "/-/metrics").text
            #expect(sample(again, #"veneer_http_requests_total{route="/-/",method="GET",status="200"}"#) == 1)
            #expect(sample(again, "veneer_http_requests_in_flight") == 1)
        }
    }

    @Test("on one connection, answers alike and unlike are each counted under their own route, method and status (the connection's counter cache)")
    func requestsByRouteOnOneConnection() async throws {
        try await withVeneer(yaml: "environments: {development: {origin: {mock: {}}}}") { (veneer: RunningVeneer) async throws in
            let connection = try await RawConnection.connect(port: veneer.port)
            defer { connection.close() }
            let requests = [("GET", "/posts"), ("GET", "/posts"), ("GET", "/nope/7"), ("GET", "/posts"), ("PATCH", "/posts"), ("GET", "/posts/999999"),
                            ("GET", "/posts")]
            for (index, (method, target)) in requests.enumerated() {
                try await connection.send("\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(veneer.port)\r\n\r\n")
                _ = try await connection.responses(index + 1)
            }
            let text = try await veneer.request("GET", "/-/metrics").text
            #expect(sample(text, #"veneer_http_requests_total{route="/posts",method="GET",status="200"}"#) == 4)
            #expect(sample(text, #"veneer_http_requests_total{route="unmatched",method="GET",status="404"}"#) == 1)
            #expect(sample(text, #"veneer_http_requests_total{route="/posts",method="PATCH",status="405"}"#) == 1)
            #expect(sample(text, #"veneer_http_requests_total{route="/posts/{id}",method="GET",status="404"}"#) == 1)
        }
    }

    @Test("veneer_build_info has the version; the reload gauges say whether the last load worked, and when one last did")
    func buildAndReload() async throws {
        let box = YAMLBox("environments: {development: {origin: {mock: {}}}}")
        let clock = ManualClock(start: Date(timeIntervalSince1970: 1_800_000_000))
        try await withVeneer(yaml: "", clock: clock, yamlProvider: { box.value }) { (veneer: RunningVeneer) async throws in
            var text = try await veneer.request("GET", "/-/metrics").text
            #expect(sample(text, "veneer_build_info{version=\"\(VeneerVersion.text)\"}") == 1)
            #expect(sample(text, "veneer_config_last_reload_successful") == 1)
            #expect(sample(text, "veneer_config_last_reload_success_timestamp_seconds") == 1_800_000_000)

            box.set("environments: {development: {origin: {mock: {}}, chain: [nonsense]}}")
            clock.advance(by: .seconds(60))
            _ = await veneer.instance.reload()
            text = try await veneer.request("GET", "/-/metrics").text
            #expect(sample(text, "veneer_config_last_reload_successful") == 0)
            #expect(sample(text, "veneer_config_last_reload_success_timestamp_seconds") == 1_800_000_000)

            box.set("environments: {development: {origin: {mock: {}}}}")
            clock.advance(by: .seconds(60))
            _ = await veneer.instance.reload()
            text = try await veneer.request("GET", "/-/metrics").text
            #expect(sample(text, "veneer_config_last_reload_successful") == 1)
            #expect(sample(text, "veneer_config_last_reload_success_timestamp_seconds") == 1_800_000_120)
        }
    }

    @Test("upstream: failed connects by reason, requests that waited for the pool, and request durations")
    func upstream() async throws {
        try await withRefusingPort { port in
            let yaml = "environments: {development: {origin: {upstream: {url: \"http://127.0.0.1:\(port)\"}}}}"
            try await withVeneer(yaml: yaml) { (veneer: RunningVeneer) async throws in
                #expect(try await veneer.request("GET", "/posts/1").status == 502)
                #expect(try await veneer.request("GET", "/posts/2").status == 502)
                let text = try await veneer.request("GET", "/-/metrics").text
                #expect(sample(text, #"veneer_upstream_connect_failures_total{reason="unreachable"}"#) == 2)
                #expect(sample(text, "veneer_upstream_request_duration_seconds_count") == 2)
            }
        }
        // Answers slow enough that the three requests overlap on a loaded run: two wait for the one connection.
        try await withTestUpstream({ _ in UpstreamReply(body: #"{"id":1}"#, delay: .seconds(1)) }) { upstream in
            let yaml = "environments: {development: {origin: {upstream: {url: \"\(upstream.url)\", connections: 1}}}}"
            try await withVeneer(yaml: yaml) { (veneer: RunningVeneer) async throws in
                try await withThrowingTaskGroup(of: Int.self) { group in
                    for id in 1...3 { group.addTask { try await veneer.request("GET", "/posts/\(id)").status } }
                    for try await status in group { #expect(status == 200) }
                }
                let text = try await veneer.request("GET", "/-/metrics").text
                #expect((sample(text, "veneer_upstream_pool_waits_total") ?? 0) >= 1)
                #expect(sample(text, #"veneer_upstream_connect_failures_total{reason="unreachable"}"#) == 0)
            }
        }
    }

    @Test("auth_refresh: refreshes by result, when the access token expires, and whether refreshing has stopped")
    func authRefresh() async throws {
        try await withAuth { (rig: AuthRig) async throws in
            #expect(try await rig.veneer.request("GET", "/posts/1").status == 200)
            var text = try await rig.veneer.request("GET", "/-/metrics").text
            #expect(sample(text, family: "veneer_auth_refresh_refreshes_total", with: #"result="granted""#) == 1)
            let expiry = try #require(sample(text, family: "veneer_auth_refresh_token_expiry_timestamp_seconds"))
            #expect(abs(expiry - rig.clock.now().addingTimeInterval(60).timeIntervalSince1970) < 2)
            #expect(sample(text, family: "veneer_auth_refresh_stopped") == 0)

            // The token endpoint revokes the family (a replay of the rotated token), as in invalid_grant's test.
            let replay = try await RawHTTP.request(port: rig.tokens.upstream.port, "POST", "/oauth/token",
                                                   headers: [("Authorization", "Basic " + Data("veneer:s3cret".utf8).base64EncodedString()),
                                                             ("Content-Type", "application/x-www-form-urlencoded")],
                                                   body: "grant_type=refresh_token&refresh_token=rt-0")
            #expect(replay.status == 400)
            rig.clock.advance(by: .seconds(61))
            #expect(try await rig.veneer.request("GET", "/posts/1").status == 401)
            text = try await rig.veneer.request("GET", "/-/metrics").text
            #expect(sample(text, family: "veneer_auth_refresh_refreshes_total", with: #"result="rejected""#) == 1)
            #expect(sample(text, family: "veneer_auth_refresh_stopped") == 1)
        }
    }
}
