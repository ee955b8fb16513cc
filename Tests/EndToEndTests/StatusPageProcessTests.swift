import Foundation
import Testing
import VeneerTestSupport

/// The status page and `/-/status` of a real process (the browser's view is
/// `StatusPageBrowserTests`).
@Suite("the status page as a real process")
struct StatusPageProcessTests {
    /// An account name that is markup: the page must show it as text.
    static let markupAccount = "<img src=x onerror=alert(1)>"

    static func config(_ directory: String, upstream: String, tokens: String) -> String {
        """
        state_dir: \(directory)/state
        environments:
          development:
            origin: { upstream: { url: "\(upstream)" } }
            chain:
              - cache: { ttl: 1h }
              - block_list:
                  learn: { status: 403, json: { error: account_blocked }, account_header: X-Account-Id }
              - fault: { allow_header: true }
              - auth_refresh: { token_url: "\(tokens)", client_id: veneer, client_secret: s3cret, refresh_token: rt-0 }
          staging:
            origin: { mock: {} }
        """
    }

    /// The upstream: the token server's protected posts, and the blocked signal for one account.
    static func reply(_ tokens: TestTokenServer) -> @Sendable (RecordedRequest) -> UpstreamReply {
        { request in
            if request.header("x-account-id") == markupAccount { return .json(#"{"error":"account_blocked"}"#, status: 403) }
            return tokens.protectedReply(request)
        }
    }

    /// A Veneer running `config`, with its upstream and token endpoint; `body` gets its port.
    static func withInstance(environment: [String: String] = [:], _ body: (Int) async throws -> Void) async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let tokens = try await TestTokenServer.start()
        defer { Task { await tokens.stop() } }
        try await withTestUpstream(reply(tokens)) { (upstream: TestUpstream) async throws in
            try config(directory, upstream: upstream.url, tokens: tokens.url).write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
            let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory,
                                            environment: environment)
            defer { process.terminate() }
            try await body(try await process.waitUntilReady())
        }
    }

    static func figures(_ status: RawResponse, _ name: String) -> [String: Any] {
        let chain = status.json?["chain"] as? [[String: Any]] ?? []
        return chain.first { $0["name"] as? String == name }?["figures"] as? [String: Any] ?? [:]
    }

    @Test("/-/status: every entry of the chain with counters that move (cache hits and misses, faults, learned blocks, refreshes, the token's expiry) and the last requests with what the chain noted")
    func statusCountersMove() async throws {
        try await Self.withInstance { port in
            let before = try await RawHTTP.request(port: port, "GET", "/-/status", headers: [("Accept", "application/json")])
            #expect(before.status == 200 && before.header("Cache-Control") == "no-store")
            let names = (before.json?["chain"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
            #expect(names == ["cache", "block_list", "fault", "auth_refresh", "upstream"])
            #expect(Self.figures(before, "cache")["hits"] as? Int == 0)
            #expect((before.json?["environments"] as? [String]) == ["development", "staging"])

            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").status == 200)
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").header("Cache-Status")?.contains("hit") == true)
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/2", headers: [("Veneer-Fault", "status=503")]).status == 503)
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/3", headers: [("X-Account-Id", Self.markupAccount)]).status == 403)

            let after = try await RawHTTP.request(port: port, "GET", "/-/status")
            let cache = Self.figures(after, "cache")
            #expect(cache["hits"] as? Int == 1 && cache["misses"] as? Int == 3 && cache["entries"] as? Int == 1)
            #expect(cache["hit_ratio"] as? Double == 0.25)
            #expect(Self.figures(after, "fault")["aborted"] as? Int == 1)
            #expect(Self.figures(after, "block_list")["learned"] as? Int == 1 && Self.figures(after, "block_list")["blocks_held"] as? Int == 1)
            let auth = Self.figures(after, "auth_refresh")
            #expect(auth["refreshes"] as? Int == 1 && auth["state"] as? String == "ok")
            #expect((auth["token_expires_in_seconds"] as? Int).map { $0 > 0 && $0 <= 60 } == true)
            #expect(!after.text.contains("rt-"), "no token on the page")
            let blocks = after.json?["blocks"] as? [[String: Any]] ?? []
            #expect(blocks.map { $0["account"] as? String } == [Self.markupAccount])
            let requests = after.json?["requests"] as? [[String: Any]] ?? []
            #expect(requests.map { $0["path"] as? String } == ["/posts/1", "/posts/1", "/posts/2", "/posts/3"], "chain requests only, oldest first")
            #expect(requests.map { $0["status"] as? Int } == [200, 200, 503, 403])
            let notes = { (index: Int) in ((requests[index]["entries"] as? [[String: Any]]) ?? []).map { "\($0["name"]!) \($0["detail"]!)" } }
            #expect(notes(1).contains { $0.hasPrefix("cache ") && $0.contains("hit") })
            #expect(notes(2).contains("fault abort 503"))
        }
    }

    @Test("GET /-/ gives a browser the page (escaped, framing refused, only its own script) and a program the JSON index")
    func pageForBrowsersJSONForPrograms() async throws {
        try await Self.withInstance { port in
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/3", headers: [("X-Account-Id", Self.markupAccount)]).status == 403)
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/%3Cscript%3E").status == 400)

            let page = try await RawHTTP.request(port: port, "GET", "/-/", headers: [("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")])
            #expect(page.status == 200 && page.header("Content-Type") == "text/html; charset=utf-8")
            #expect(page.header("X-Frame-Options") == "DENY" && page.header("Cache-Control") == "no-store")
            // Not no-referrer: Chromium then sends Origin: null with the page's own form posts.
            #expect(page.header("Referrer-Policy") == "same-origin")
            let policy = try #require(page.header("Content-Security-Policy"))
            #expect(policy.contains("frame-ancestors 'none'") && policy.contains("form-action 'self'") && !policy.contains("unsafe-inline"))
            let nonce = try #require(policy.split(separator: "'").first { $0.hasPrefix("nonce-") }).dropFirst(6)
            #expect(page.text.contains("<script nonce=\"\(nonce)\">"))
            #expect(page.text.contains("&lt;img src=x onerror=alert(1)&gt;") && !page.text.contains(Self.markupAccount), "markup from outside is text")
            #expect(!page.text.contains("<script>"), "a path is text too")
            for box in ["cache", "block_list", "fault", "auth_refresh", "upstream"] { #expect(page.text.contains("data-name=\"\(box)\"")) }
            #expect(page.text.contains("<form id=\"switch\" method=\"post\" action=\"/-/environment\">"))
            #expect(page.text.contains("<option value=\"staging\">staging</option>"))
            let second = try await RawHTTP.request(port: port, "GET", "/-/", headers: [("Accept", "text/html")])
            #expect(second.header("Content-Security-Policy") != policy, "a fresh nonce per page")

            for accept in [nil, "application/json", "*/*"] {
                let index = try await RawHTTP.request(port: port, "GET", "/-/", headers: accept.map { [("Accept", $0)] } ?? [])
                #expect(index.header("Content-Type") == "application/json" && index.json?["endpoints"] != nil, "\(accept ?? "no Accept")")
            }
            // The decorators' endpoints say their methods and what each does, as the runtime's do.
            let endpoints = try await RawHTTP.request(port: port, "GET", "/-/").json?["endpoints"] as? [[String: Any]] ?? []
            for (path, methods) in [("/-/blocks", ["GET"]), ("/-/blocks/{account}", ["DELETE", "POST"]), ("/-/cache", ["GET", "DELETE"])] {
                let listed = endpoints.first { $0["path"] as? String == path }
                #expect(listed?["methods"] as? [String] == methods, "\(path)")
                #expect((listed?["summary"] as? String ?? "").count > 40 && !(listed?["summary"] as? String ?? "").contains("added by a decorator"), "\(path)")
            }
        }
    }

    @Test("the page's unblock button (a form post) lifts a block from the page's own origin only; a cross-site post is refused and the block stays")
    func unblockForm() async throws {
        try await Self.withInstance { port in
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/3", headers: [("X-Account-Id", Self.markupAccount)]).status == 403)
            let page = try await RawHTTP.request(port: port, "GET", "/-/", headers: [("Accept", "text/html")])
            // The form as the page has it.
            let action = try #require(page.text.firstMatch(of: /<form method="post" action="(\/-\/blocks\/[^"]+)"><input type="hidden" name="action" value="unblock">/)?.1)
            let form: [(String, String)] = [("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "text/html")]
            for attacker in [[("Origin", "http://evil.example"), ("Sec-Fetch-Site", "cross-site")],
                             [("Origin", "http://127.0.0.1:1"), ("Sec-Fetch-Site", "same-site")],
                             [("Sec-Fetch-Site", "same-site")]] {
                let refused = try await RawHTTP.request(port: port, "POST", String(action), headers: form + attacker, body: "action=unblock")
                #expect(refused.status == 403 && refused.errorCode == "cross_site_refused", "\(attacker)")
            }
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/3", headers: [("X-Account-Id", Self.markupAccount)]).errorCode == "account_blocked")

            let browser = [("Origin", "http://127.0.0.1:\(port)"), ("Sec-Fetch-Site", "same-origin")]
            let lifted = try await RawHTTP.request(port: port, "POST", String(action), headers: form + browser, body: "action=unblock")
            #expect(lifted.status == 303 && lifted.header("Location") == "/-/")
            let blocks = try await RawHTTP.request(port: port, "GET", "/-/blocks")
            #expect(blocks.text.trimmingCharacters(in: .whitespacesAndNewlines) == "[]")
            // A program posting the form without a browser's headers gets JSON.
            let again = try await RawHTTP.request(port: port, "POST", String(action), headers: [("Content-Type", "application/x-www-form-urlencoded")],
                                                  body: "action=unblock")
            #expect(again.status == 404 && again.header("Content-Type") == "application/json")
        }
    }

    @Test("under systemd the page's switcher is off and says why (the instance name is the environment)")
    func switcherOffUnderSystemd() async throws {
        try await Self.withInstance(environment: ["INVOCATION_ID": "0123456789abcdef0123456789abcdef"]) { port in
            let page = try await RawHTTP.request(port: port, "GET", "/-/", headers: [("Accept", "text/html")])
            #expect(page.text.contains("<select name=\"environment\" disabled>") && page.text.contains("<button disabled>Switch</button>"))
            #expect(page.text.contains("systemd"))
            let status = try await RawHTTP.request(port: port, "GET", "/-/status")
            #expect((status.json?["switch_refused"] as? String)?.contains("systemd") == true)
        }
    }

    @Test("GET /-/events streams each request as it is answered (with every decorator's note while it is open, trace or not), resumes after Last-Event-ID, and an open stream does not hold up shutdown")
    func eventsStream() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "environments:\n  development:\n    origin: { mock: { sample: true } }\n    chain: [latency_log, cache]\n"
            .write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
        defer { process.terminate() }
        let port = try await process.waitUntilReady()
        #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").status == 200)
        // The request joins the feed once answered, in its own time.
        var unwatchedNames: [String] = []
        try await eventually("/-/status lists the request") {
            let requests = try? await RawHTTP.request(port: port, "GET", "/-/status").json?["requests"] as? [[String: Any]]
            guard let request = requests?.first(where: { $0["path"] as? String == "/posts/1" }) else { return false }
            unwatchedNames = ((request["entries"] as? [[String: Any]]) ?? []).compactMap { $0["name"] as? String }
            return true
        }
        #expect(unwatchedNames == ["cache", "mock"], "trace off, nobody watching: what the access log needs only")

        #expect(try await RawHTTP.request(port: port, "GET", "/-/events?environment=staging").status == 409, "another environment's instance")
        // A position that is not an event id is a 400, however large (it goes through the bounds).
        for after in ["abc", "-1", "9223372036854775808", "1e400", "1.5"] {
            let answer = try await RawHTTP.request(port: port, "GET", "/-/events?after=\(after)")
            #expect(answer.status == 400 && answer.errorCode == "bad_request", "?after=\(after)")
        }
        let badID = try await RawHTTP.request(port: port, "GET", "/-/events", headers: [("Last-Event-ID", "99999999999999999999")])
        #expect(badID.status == 400 && process.process.isRunning)
        let stream = try await RawConnection.connect(port: port)
        defer { stream.close() }
        try await stream.send("GET /-/events HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nLast-Event-ID: 1\r\n\r\n")
        let head = try await stream.wait { bytes, _ in String(decoding: bytes, as: UTF8.self).contains("retry: 2000\n\n") }
        let text = String(decoding: head, as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 200") && text.lowercased().contains("content-type: text/event-stream"))
        #expect(!text.contains("id: 1\n"), "resumed after event 1")
        #expect(try await RawHTTP.request(port: port, "GET", "/posts/2").status == 200)
        let event = try await stream.wait { bytes, _ in String(decoding: bytes, as: UTF8.self).contains("id: 2\nevent: request\ndata: ") }
        let line = try #require(String(decoding: event, as: UTF8.self).split(separator: "\n").first { $0.hasPrefix("data: ") && $0.contains("\"sequence\":2") })
        let json = try JSONSerialization.jsonObject(with: Data(line.dropFirst(6).utf8)) as? [String: Any]
        #expect(json?["path"] as? String == "/posts/2" && json?["status"] as? Int == 200)
        let names = ((json?["entries"] as? [[String: Any]]) ?? []).compactMap { $0["name"] as? String }
        #expect(names == ["latency_log", "cache", "mock"], "watched: every decorator's note")

        let started = ContinuousClock.now
        process.signal(SIGTERM)
        #expect(await process.wait(timeout: .seconds(10)) == 0)
        #expect(ContinuousClock.now - started < .seconds(5), "the open stream ends with shutdown")
        try await stream.waitForClose()
    }
}
