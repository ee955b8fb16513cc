import Foundation
import Testing
import VeneerTestSupport

/// The holes of issue 17 that a web page or a spoofing caller would use, tried on the real
/// binary: what Veneer refuses at its edge, and that nothing refused reaches the upstream.
@Suite("Veneer's edge as a real process: Host, Origin, the admin API")
struct EdgeSecurityProcessTests {
    /// A running `veneer` (in a fresh directory) with `yaml`; stopped when `body` returns.
    func withProcess<T>(yaml: String, files: [String: String] = [:], _ body: (VeneerProcess, Int) async throws -> T) async throws -> T {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try yaml.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        for (name, text) in files { try text.write(toFile: directory + "/" + name, atomically: true, encoding: .utf8) }
        let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
        defer { process.terminate() }
        let port = try await process.waitUntilReady()
        return try await body(process, port)
    }

    /// One request with exactly this `Host` (nil: none, HTTP/1.0) and these fields.
    func send(_ port: Int, _ target: String, method: String = "GET", host: String?, headers: [(String, String)] = [],
              body: String? = nil) async throws -> RawResponse {
        var text = "\(method) \(target) HTTP/1.\(host == nil ? 0 : 1)\r\n"
        if let host { text += "Host: \(host)\r\n" }
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        if let body { text += "Content-Length: \(body.utf8.count)\r\n" }
        text += "Connection: close\r\n\r\n" + (body ?? "")
        return try await RawHTTP.send(port: port, Array(text.utf8))
    }

    func upstreamYAML(_ upstream: TestUpstream, _ extra: String = "") -> String {
        """
        environments:
          development:
            origin: { upstream: { url: "\(upstream.url)" } }
            chain: [{ cache: { ttl: 1h } }, { block_list: { learn: { status: 403, account_header: X-Account-Id } } }]
        \(extra)
        """
    }

    @Test("a Host Veneer does not answer for (DNS rebinding) gets 421 misdirected_request and nothing is forwarded; its own names pass")
    func hostCheck() async throws {
        try await withTestUpstream({ _ in .json(#"{"id":1,"title":"t","body":"b"}"#) }) { (upstream: TestUpstream) async throws in
            try await withProcess(yaml: upstreamYAML(upstream)) { (_: VeneerProcess, port: Int) async throws in
                for host in ["rebind.attacker.example", "rebind.attacker.example:\(port)", "127.0.0.1:\(port + 1)", "0.0.0.0:\(port)",
                             "localhost.:\(port)", "127.0.0.1:\(port)@evil", "[::1]"] {
                    let refused = try await send(port, "/posts/1", host: host)
                    #expect(refused.status == 421 && refused.errorCode == "misdirected_request", "Host: \(host)")
                }
                // The authority of an absolute-form target is the Host.
                let absolute = try await send(port, "http://rebind.attacker.example/posts/1", host: "127.0.0.1:\(port)")
                #expect(absolute.status == 421)
                // The admin API answers the same way.
                #expect(try await send(port, "/-/health", host: "rebind.attacker.example:\(port)").status == 421)
                #expect(upstream.count == 0, "nothing refused reached the upstream")

                for host in ["127.0.0.1:\(port)", "localhost:\(port)", "LOCALHOST:\(port)", "[::1]:\(port)"] {
                    #expect(try await send(port, "/posts/1", host: host).status == 200, "Host: \(host)")
                }
                // HTTP/1.0 without a Host is a program, not a browser.
                #expect(try await send(port, "/posts/1", host: nil).status == 200)
                #expect(try await send(port, "/-/health", host: "localhost:\(port)").status == 200)
            }
        }
    }

    @Test("allowed_hosts adds names (with or without a port); a wildcard or non-loopback listen without it is a check error, and run exits 78")
    func allowedHosts() async throws {
        let yaml = """
            environments:
              development:
                origin: { mock: {} }
                allowed_hosts: [veneer.test, "other.test:8443"]
            """
        try await withProcess(yaml: yaml) { (_: VeneerProcess, port: Int) async throws in
            #expect(try await send(port, "/posts", host: "veneer.test:\(port)").status == 200)
            #expect(try await send(port, "/posts", host: "veneer.test").status == 200)
            #expect(try await send(port, "/posts", host: "other.test:8443").status == 200)
            #expect(try await send(port, "/posts", host: "other.test:\(port)").status == 421)
        }

        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let wildcard = """
            environments:
              development:
                listen: 0.0.0.0:0
                origin: { mock: {} }
              lan:
                listen: 192.0.2.10:8080
                origin: { mock: {} }
              listed:
                listen: "[::]:0"
                origin: { mock: {} }
                allowed_hosts: [veneer.example.lan]
              plain:
                origin: { mock: {} }
              typo:
                origin: { mock: {} }
                allowed_hosts: ["*.example", 0.0.0.0]
                allowed_origins: ["http://localhost:3000/app", "*"]
            """
        try wildcard.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        let check = try await VeneerProcess.run(["check", "--all", "--config", "veneer.yaml"], directory: directory)
        let said = check.stdout + check.stderr
        #expect(check.status != 0)
        #expect(said.contains("veneer.yaml:3:13: error: environments.development.listen: 0.0.0.0:0 is reached by names"), "\(said)")
        #expect(said.contains("environments.lan.listen: 192.0.2.10:8080 is reached by names"))
        #expect(!said.contains("environments.listed"))
        #expect(said.contains("environments.typo.allowed_hosts[0]: \"*.example\" is not a host name"))
        #expect(said.contains("environments.typo.allowed_hosts[1]"))
        #expect(said.contains("environments.typo.allowed_origins[0]: \"http://localhost:3000/app\" is not an origin"))
        #expect(said.contains("environments.typo.allowed_origins[1]"))
        let run = try await VeneerProcess.run(["run", "--config", "veneer.yaml"], directory: directory)
        #expect(run.status == 78, "\(run.stderr)")
        let override = try await VeneerProcess.run(["run", "--config", "veneer.yaml", "-e", "plain", "--listen", "0.0.0.0:0"], directory: directory)
        #expect(override.status == 78 && override.stderr.contains("allowed_hosts"), "\(override.stderr)")
    }

    @Test("a page of another site is refused 403 cross_site_refused (Origin, or Sec-Fetch-Site on a change); programs and Veneer's own origin pass")
    func crossSite() async throws {
        try await withTestUpstream({ _ in .json(#"{"id":1,"title":"t","body":"b"}"#, status: 201) }) { (upstream: TestUpstream) async throws in
            try await withProcess(yaml: upstreamYAML(upstream)) { (_: VeneerProcess, port: Int) async throws in
                let host = "127.0.0.1:\(port)"
                let post = #"{"title":"t","body":"b"}"#
                for headers in [
                    [("Origin", "https://evil.example"), ("Content-Type", "text/plain")],
                    [("Origin", "null")],
                    [("Origin", "http://127.0.0.1:\(port + 1)")],
                    [("Origin", "https://127.0.0.1:\(port)")],
                    [("Origin", "http://127.0.0.1:\(port)"), ("Origin", "https://evil.example")],
                    [("Sec-Fetch-Site", "cross-site")],
                    [("Sec-Fetch-Site", "same-site")],
                ] {
                    let refused = try await send(port, "/posts", method: "POST", host: host, headers: headers, body: post)
                    #expect(refused.status == 403 && refused.errorCode == "cross_site_refused", "\(headers)")
                }
                // Any Origin not allowed, even on a read.
                #expect(try await send(port, "/posts/1", host: host, headers: [("Origin", "https://evil.example")]).status == 403)
                #expect(upstream.count == 0, "nothing refused reached the upstream")

                // Programs send neither header; a read navigated to from elsewhere changes nothing.
                #expect(try await send(port, "/posts", method: "POST", host: host, body: post).status == 201)
                #expect([200, 201].contains(try await send(port, "/posts/1", host: host, headers: [("Sec-Fetch-Site", "cross-site")]).status))
                // Veneer's own origin: the one the request came to, http:// and its Host exactly.
                for name in ["127.0.0.1", "localhost", "[::1]"] {
                    let own = try await send(port, "/posts", method: "POST", host: "\(name):\(port)",
                                             headers: [("Origin", "http://\(name):\(port)"), ("Sec-Fetch-Site", "same-origin")], body: post)
                    #expect(own.status == 201, "\(name)")
                }
                // Another name of the listener is another origin (another program may listen on [::1]).
                let otherName = try await send(port, "/posts", method: "POST", host: host, headers: [("Origin", "http://localhost:\(port)")], body: post)
                #expect(otherName.status == 403)
            }
        }
    }

    @Test("an allowed_origins page gets real CORS: the preflight answered by Veneer, ACAO and Vary: Origin on answers, never in the cache")
    func cors() async throws {
        try await withTestUpstream({ _ in .json(#"{"id":1,"title":"t","body":"b"}"#) }) { (upstream: TestUpstream) async throws in
            let yaml = upstreamYAML(upstream, "    allowed_origins: [\"http://localhost:3000\"]")
            try await withProcess(yaml: yaml) { (_: VeneerProcess, port: Int) async throws in
                let host = "127.0.0.1:\(port)"
                let app = "http://localhost:3000"
                let preflight = try await send(port, "/posts/1", method: "OPTIONS", host: host, headers: [
                    ("Origin", app), ("Access-Control-Request-Method", "PUT"), ("Access-Control-Request-Headers", "content-type, x-account-id"),
                ])
                #expect(preflight.status == 204)
                #expect(preflight.header("Access-Control-Allow-Origin") == app)
                #expect(preflight.header("Access-Control-Allow-Methods")?.contains("PUT") == true)
                #expect(preflight.header("Access-Control-Allow-Headers") == "content-type, x-account-id")
                #expect(preflight.header("Access-Control-Max-Age") == "600")
                #expect(preflight.header("Vary")?.contains("Origin") == true)
                #expect(upstream.count == 0, "the preflight is Veneer's to answer")

                let fromApp = try await send(port, "/posts/1", host: host, headers: [("Origin", app), ("Sec-Fetch-Site", "same-site")])
                #expect(fromApp.status == 200)
                #expect(fromApp.header("Access-Control-Allow-Origin") == app)
                #expect(fromApp.header("Vary")?.contains("Origin") == true)
                // The cached answer carries none of it: it was added on the way out.
                let program = try await send(port, "/posts/1", host: host)
                #expect(program.header("Cache-Status")?.contains("hit") == true)
                #expect(program.header("Access-Control-Allow-Origin") == nil)
                // A change from the listed origin passes; another origin's preflight does not.
                let put = try await send(port, "/posts/1", method: "PUT", host: host, headers: [("Origin", app), ("Sec-Fetch-Site", "same-site")],
                                         body: #"{"title":"t","body":"b"}"#)
                #expect(put.status == 200 && put.header("Access-Control-Allow-Origin") == app)
                let other = try await send(port, "/posts/1", method: "OPTIONS", host: host,
                                           headers: [("Origin", "http://localhost:3001"), ("Access-Control-Request-Method", "PUT")])
                #expect(other.status == 403 && other.header("Access-Control-Allow-Origin") == nil)
            }
        }
    }

    @Test("a port-less allowed_hosts name answers that host on any port, but a page on another port of it is not Veneer's origin: 403, no CORS, no preflight")
    func portlessAllowedHostOrigin() async throws {
        let yaml = """
            environments:
              development:
                origin: { mock: { sample: true } }
                allowed_hosts: [devbox.test]
            """
        try await withProcess(yaml: yaml) { (_: VeneerProcess, port: Int) async throws in
            let host = "devbox.test:\(port)"
            let read = try await send(port, "/posts/1", host: host, headers: [("Origin", "http://devbox.test:3000")])
            #expect(read.status == 403 && read.errorCode == "cross_site_refused" && read.header("Access-Control-Allow-Origin") == nil, "\(read.text)")
            let preflight = try await send(port, "/posts/1", method: "OPTIONS", host: host,
                                           headers: [("Origin", "http://devbox.test:3000"), ("Access-Control-Request-Method", "DELETE")])
            #expect(preflight.status == 403 && preflight.header("Access-Control-Allow-Methods") == nil)
            let delete = try await send(port, "/posts/1", method: "DELETE", host: host, headers: [("Origin", "http://devbox.test:3000")])
            #expect(delete.status == 403)
            #expect(try await send(port, "/-/health", host: host, headers: [("Origin", "http://devbox.test:3000")]).status == 403)
            // Veneer's own page there, and a program, are served; so is any port of the name as a Host.
            let own = try await send(port, "/posts/1", host: host, headers: [("Origin", "http://devbox.test:\(port)")])
            #expect(own.status == 200)
            #expect(try await send(port, "/posts/1", host: "devbox.test:3000").status == 200)
            #expect(try await send(port, "/posts/1", host: "127.0.0.1:\(port)").status == 200, "the post was not deleted")
        }
    }

    @Test("the admin API: same Host check; changes only from programs (no Origin) or its own page same-origin; allowed_origins never opens it")
    func admin() async throws {
        let yaml = """
            environments:
              development:
                origin: { mock: {} }
                chain: [{ block_list: { learn: { status: 403, account_header: X-Account-Id } } }]
                allowed_origins: ["http://localhost:3000"]
            """
        try await withProcess(yaml: yaml) { (_: VeneerProcess, port: Int) async throws in
            let host = "127.0.0.1:\(port)"
            let own = "http://127.0.0.1:\(port)"
            for headers in [
                [("Origin", "http://localhost:3000")],
                [("Origin", "http://localhost:3000"), ("Sec-Fetch-Site", "same-site")],
                [("Origin", "https://evil.example"), ("Sec-Fetch-Site", "cross-site")],
                [("Origin", own)],
                [("Origin", own), ("Sec-Fetch-Site", "same-site")],
                [("Sec-Fetch-Site", "cross-site")],
            ] {
                let refused = try await send(port, "/-/blocks/4242", method: "DELETE", host: host, headers: headers)
                #expect(refused.status == 403 && refused.errorCode == "cross_site_refused", "\(headers)")
            }
            // The admin API never answers a listed origin, even a read, and never with CORS.
            let read = try await send(port, "/-/health", host: host, headers: [("Origin", "http://localhost:3000")])
            #expect(read.status == 403 && read.header("Access-Control-Allow-Origin") == nil)
            let preflight = try await send(port, "/-/blocks/4242", method: "OPTIONS", host: host,
                                           headers: [("Origin", "http://localhost:3000"), ("Access-Control-Request-Method", "DELETE")])
            #expect(preflight.status == 403)
            #expect(try await send(port, "/-/blocks/4242", method: "DELETE", host: "evil.example:\(port)").status == 421)

            // A program (veneer unblock) and Veneer's own page reach it: 404, nothing was blocked.
            #expect(try await send(port, "/-/blocks/4242", method: "DELETE", host: host).status == 404)
            let page = try await send(port, "/-/blocks/4242", method: "DELETE", host: host, headers: [("Origin", own), ("Sec-Fetch-Site", "same-origin")])
            #expect(page.status == 404)
            #expect(try await send(port, "/-/health", host: host, headers: [("Origin", own)]).status == 200)
        }
    }
}

extension EdgeSecurityProcessTests {
    @Test("forwarding headers from callers are stripped (an origin that reflects them cannot poison the cache); one passed on by name keys the cache")
    func forwardingHeaders() async throws {
        let spoofed = [("X-Forwarded-Host", "evil.example"), ("X-Original-URL", "/admin"), ("X-Rewrite-URL", "/admin"),
                       ("X-Forwarded-Proto", "gopher"), ("Forwarded", "host=evil.example;proto=https"), ("X-HTTP-Method-Override", "DELETE")]
        try await withTestUpstream({ request in
            // An origin that builds links from what it is told.
            let host = request.header("x-forwarded-host") ?? "api.example"
            let proto = request.header("x-forwarded-proto") ?? "http"
            return .json(#"{"id":1,"title":"t","body":"b","link":"\#(proto)://\#(host)/posts/1"}"#, headers: [("Cache-Control", "max-age=60")])
        }) { (upstream: TestUpstream) async throws in
            try await withProcess(yaml: upstreamYAML(upstream)) { (_: VeneerProcess, port: Int) async throws in
                let host = "127.0.0.1:\(port)"
                let attacker = try await send(port, "/posts/1", host: host, headers: spoofed)
                #expect(attacker.text.contains("http://api.example/posts/1"))
                let forwarded = try #require(upstream.requests.first)
                for (name, _) in spoofed { #expect(forwarded.header(name) == nil, "\(name) reached the upstream") }
                #expect(forwarded.header("X-Forwarded-For") != nil, "Veneer sets its own")
                let victim = try await send(port, "/posts/1", host: host)
                #expect(victim.text.contains("http://api.example/posts/1") && victim.header("Cache-Status")?.contains("hit") == true)
            }
            upstream.reset()
            let yaml = upstreamYAML(upstream, "    pass_forwarding_headers: [X-Forwarded-Proto]")
            try await withProcess(yaml: yaml) { (_: VeneerProcess, port: Int) async throws in
                let host = "127.0.0.1:\(port)"
                let https = try await send(port, "/posts/1", host: host, headers: spoofed)
                #expect(https.text.contains("gopher://api.example/posts/1"), "passed on by name")
                #expect(upstream.requests.first?.header("X-Forwarded-Host") == nil, "the others are still stripped")
                let plain = try await send(port, "/posts/1", host: host)
                #expect(plain.text.contains("http://api.example/posts/1"), "another X-Forwarded-Proto is another cache entry")
                let again = try await send(port, "/posts/1", host: host, headers: [("X-Forwarded-Proto", "gopher")])
                #expect(again.text.contains("gopher://") && again.header("Cache-Status")?.contains("hit") == true)
                #expect(upstream.count == 2)
            }
        }
    }
}

extension EdgeSecurityProcessTests {
    @Test("X-Forwarded-For from a caller is stripped: the upstream sees only the client's address, unless pass_forwarding_headers names it")
    func forwardedFor() async throws {
        let spoofed = [("X-Forwarded-For", "5.5.5.5"), ("X-Real-IP", "6.6.6.6"), ("Forwarded", "for=7.7.7.7")]
        try await withTestUpstream({ _ in .json(#"{"id":1,"title":"t","body":"b"}"#) }) { (upstream: TestUpstream) async throws in
            // The upstream origin, and replay's misses sent on with on_miss: upstream.
            let replay = """
                environments:
                  development:
                    origin: { replay: { file: empty.har, on_miss: upstream, upstream: { url: "\(upstream.url)" } } }
                """
            for yaml in [upstreamYAML(upstream), replay] {
                upstream.reset()
                try await withProcess(yaml: yaml, files: ["empty.har": #"{"log":{"version":"1.2","creator":{"name":"t","version":"1"},"entries":[]}}"#]) {
                    (_: VeneerProcess, port: Int) async throws in
                    #expect(try await send(port, "/posts/1", host: "127.0.0.1:\(port)", headers: spoofed).status == 200)
                    let forwarded = try #require(upstream.requests.first)
                    #expect(forwarded.header("X-Forwarded-For") == "127.0.0.1", "the leftmost entry is never the caller's")
                    #expect(forwarded.header("X-Real-IP") == nil && forwarded.header("Forwarded") == nil)
                }
            }
            upstream.reset()
            try await withProcess(yaml: upstreamYAML(upstream, "    pass_forwarding_headers: [X-Forwarded-For]")) { (_: VeneerProcess, port: Int) async throws in
                #expect(try await send(port, "/posts/1", host: "127.0.0.1:\(port)", headers: spoofed).status == 200)
                #expect(upstream.requests.first?.header("X-Forwarded-For") == "5.5.5.5, 127.0.0.1", "a trusted proxy's list, appended to")
            }
        }
    }
}

extension EdgeSecurityProcessTests {
    @Test("an integer id is a positive integer as written: 0, 00 and 01 get 400 as the message says, and no path is rewritten")
    func integerIDs() async throws {
        try await withTestUpstream({ _ in .json(#"{"id":1,"title":"t","body":"b"}"#) }) { (upstream: TestUpstream) async throws in
            try await withProcess(yaml: upstreamYAML(upstream)) { (_: VeneerProcess, port: Int) async throws in
                for id in ["0", "00", "01", "007"] {
                    let refused = try await send(port, "/posts/\(id)", host: "127.0.0.1:\(port)")
                    #expect(refused.status == 400, "/posts/\(id)")
                    #expect(refused.text.contains("expected a positive integer"))
                }
                #expect(upstream.requests.isEmpty, "\(upstream.requests.map(\.target))")
                #expect(try await send(port, "/posts/10", host: "127.0.0.1:\(port)").status == 200)
                #expect(upstream.requests.map(\.target) == ["/posts/10"])
            }
        }
    }
}

extension EdgeSecurityProcessTests {
    @Test("a 502 says what failed and the request id, never the upstream's host:port or a parser's words; the daemon log has them, by request id")
    func quietFailures() async throws {
        let upstream = try await ScriptedUpstream.start { _ in .replyAndClose("HTTP/1.1 2x0 Bogus-Status-Text\r\nContent-Length: 2\r\n\r\n{}") }
        try await withRefusingPort { (refusing: Int) async throws in
            let malformed: (String, [String]) = ("http://127.0.0.1:\(upstream.port)", ["127.0.0.1:\(upstream.port)", "\(upstream.port)", "status"])
            let unreachable: (String, [String]) = ("http://127.0.0.1:\(refusing)", ["127.0.0.1:\(refusing)", "\(refusing)", "refused"])
            for (url, internals) in [malformed, unreachable] {
                let yaml = "environments: {development: {origin: {upstream: {url: \"\(url)\"}}}}"
                try await withProcess(yaml: yaml) { (process: VeneerProcess, port: Int) async throws in
                    let answer = try await send(port, "/posts/1", host: "127.0.0.1:\(port)", headers: [("X-Request-Id", "quiet-1")])
                    #expect(answer.status == 502 && answer.errorCode == "upstream_unavailable")
                    #expect(answer.json?["request_id"] as? String == "quiet-1", "\(answer.text)")
                    for leak in internals { #expect(!answer.text.lowercased().contains(leak.lowercased()), "\(leak) in \(answer.text)") }
                    try await eventually("the quiet request is logged") { process.stderr.contains("quiet-1") }
                    let logged = process.stderr.split(separator: "\n").first { $0.contains("quiet-1") } ?? ""
                    #expect(logged.contains(internals[0]), "the log has the detail: \(logged)")
                }
            }
        }
    }
}

extension EdgeSecurityProcessTests {
    @Test("header names with '_' never reach the upstream; UTF-8 values arrive byte for byte and key the cache apart; bytes that are not UTF-8 get 400")
    func headerBytes() async throws {
        try await withTestUpstream({ request in
            let body: [String: Any] = ["id": 1, "title": "t", "body": "b", "seen": request.header("authorization") ?? ""]
            return .json(String(decoding: try JSONSerialization.data(withJSONObject: body), as: UTF8.self),
                         headers: [("Cache-Control", "public, max-age=60")])
        }) { (upstream: TestUpstream) async throws in
            try await withProcess(yaml: upstreamYAML(upstream)) { (_: VeneerProcess, port: Int) async throws in
                func raw(_ fields: [UInt8]) async throws -> RawResponse {
                    try await RawHTTP.send(port: port, Array("GET /posts/1 HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n".utf8)
                        + fields + Array("\r\n".utf8))
                }
                let underscored = try await raw(Array("Transfer_Encoding: chunked\r\nX_Forwarded_Host: evil.example\r\nX-Name: café\r\n".utf8))
                #expect(underscored.status == 200)
                let forwarded = try #require(upstream.requests.last)
                #expect(!forwarded.headers.contains { $0.name.contains("_") }, "\(forwarded.headers)")
                #expect(forwarded.header("X-Name") == "café", "UTF-8 arrives as it was sent")

                // Two callers whose credentials differ only in bytes that are not UTF-8 would share one cache entry
                // once both became U+FFFD: refused, never forwarded, never stored.
                let before = upstream.count
                for bytes: [UInt8] in [[0xE9], [0xE8], [0xFF, 0xFE]] {
                    let refused = try await raw(Array("Authorization: Bearer ".utf8) + bytes + Array("\r\n".utf8))
                    #expect(refused.status == 400 && refused.errorCode == "bad_request")
                }
                #expect(upstream.count == before)
                // UTF-8 credentials that differ are different entries, each with its own answer.
                let first = try await raw(Array("Authorization: Bearer é\r\n".utf8))
                let second = try await raw(Array("Authorization: Bearer è\r\n".utf8))
                #expect(first.json?["seen"] as? String == "Bearer é" && second.json?["seen"] as? String == "Bearer è")
                let again = try await raw(Array("Authorization: Bearer é\r\n".utf8))
                #expect(again.json?["seen"] as? String == "Bearer é" && again.header("Cache-Status")?.contains("hit") == true)
            }
        }
    }
}
