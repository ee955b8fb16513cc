import Foundation
import Testing
import VeneerTestSupport

@Suite("block_list as a real process")
struct BlockListProcessTests {
    func config(_ directory: String, upstream: String) -> String {
        """
        state_dir: \(directory)/state
        stores:
          local: { sqlite: veneer.sqlite }
        environments:
          development:
            origin: { upstream: { url: "\(upstream)" } }
            chain:
              - block_list:
                  store: local
                  rules_file: \(directory)/rules.txt
                  learn: { status: 403, json: { error: account_blocked }, account_header: X-Account-Id }
        """
    }

    @Test("list syntax does not slip past a rule: '666, 1', a second field, spaces, case; a learned block holds for a request naming it among others")
    func listSyntax() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "deny header X-Account-Id 666\ndeny header X-Account-Id acct-a\n".write(toFile: directory + "/rules.txt", atomically: true, encoding: .utf8)
        try await withTestUpstream({ request in
            request.header("x-account-id") == "acct-13" ? .json(#"{"error":"account_blocked"}"#, status: 403) : .json(#"{"id":1}"#)
        }) { (upstream: TestUpstream) async throws in
            try config(directory, upstream: upstream.url).write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
            let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
            defer { process.terminate() }
            let port = try await process.waitUntilReady()
            for headers in [[("X-Account-Id", "666, 1")], [("X-Account-Id", "1,666")], [("X-Account-Id", "1"), ("X-Account-Id", "666")],
                            [("X-Account-Id", ", 666 ,")], [("X-Account-Id", "ACCT-A")]] {
                let refused = try await RawHTTP.request(port: port, "GET", "/posts/1", headers: headers)
                #expect(refused.status == 403 && refused.errorCode == "client_blocked", "\(headers)")
            }
            #expect(upstream.count == 0)
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1", headers: [("X-Account-Id", "acct-13")]).status == 403)
            #expect(upstream.count == 1, "the block is learned")
            for headers in [[("X-Account-Id", "acct-13, 1")], [("X-Account-Id", "1"), ("X-Account-Id", "acct-13")]] {
                let refused = try await RawHTTP.request(port: port, "GET", "/posts/1", headers: headers)
                #expect(refused.status == 403 && refused.errorCode == "account_blocked", "\(headers)")
            }
            #expect(upstream.count == 1, "a learned block is not bypassed by naming the account twice or in a list")
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1", headers: [("X-Account-Id", "1, 2")]).status == 200)
        }
    }

    @Test("veneer unblock acts on the store when the Veneer on its listen address serves another configuration (a make run dev proxy)")
    func unblockChecksWhomItReaches() async throws {
        let ours = try temporaryDirectory(), theirs = try temporaryDirectory()
        defer {
            try? FileManager.default.removeItem(atPath: ours)
            try? FileManager.default.removeItem(atPath: theirs)
        }
        for directory in [ours, theirs] { try "".write(toFile: directory + "/rules.txt", atomically: true, encoding: .utf8) }
        try await withTestUpstream({ request in
            request.header("x-account-id") == "acct-13" ? .json(#"{"error":"account_blocked"}"#, status: 403) : .json(#"{"id":1}"#)
        }) { (upstream: TestUpstream) async throws in
            // Our instance learns a block, and stops.
            try config(ours, upstream: upstream.url).write(toFile: ours + "/veneer.yaml", atomically: true, encoding: .utf8)
            let first = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: ours)
            let port = try await first.waitUntilReady()
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1", headers: [("X-Account-Id", "acct-13")]).status == 403)
            first.signal(SIGTERM)
            #expect(await first.wait() == 0)

            // Another configuration's Veneer now serves the address ours is configured for.
            try config(theirs, upstream: upstream.url).write(toFile: theirs + "/veneer.yaml", atomically: true, encoding: .utf8)
            let other = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: theirs)
            defer { other.terminate() }
            let otherPort = try await other.waitUntilReady()
            let moved = config(ours, upstream: upstream.url).replacingOccurrences(of: "    origin:", with: "    listen: 127.0.0.1:\(otherPort)\n    origin:")
            try moved.write(toFile: ours + "/veneer.yaml", atomically: true, encoding: .utf8)

            let unblock = try await VeneerProcess.run(["unblock", "acct-13", "--config", "veneer.yaml"], directory: ours)
            #expect(unblock.status == 0, "\(unblock.stdout)\(unblock.stderr)")
            #expect(unblock.stdout.contains("unblocked acct-13 (the store)"), "\(unblock.stdout)")
            #expect(unblock.stderr.contains("serves environment development of \(theirs)/veneer.yaml, not environment development of \(ours)/veneer.yaml"),
                    "\(unblock.stderr)")
            // Lifted: a second unblock finds nothing.
            #expect(try await VeneerProcess.run(["unblock", "acct-13", "--config", "veneer.yaml"], directory: ours).status == 1)
        }
    }

    @Test("a learned block holds with zero upstream calls, survives a restart, and is lifted by veneer unblock")
    func learnedBlocks() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "# no static rules yet\n".write(toFile: directory + "/rules.txt", atomically: true, encoding: .utf8)
        try await withTestUpstream({ request in
            request.header("x-account-id") == "acct-13" ? .json(#"{"error":"account_blocked"}"#, status: 403) : .json(#"{"id":1}"#)
        }) { (upstream: TestUpstream) async throws in
            try config(directory, upstream: upstream.url).write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
            let arguments = ["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"]
            let blocked = [("X-Account-Id", "acct-13")]

            var process = try VeneerProcess(arguments, directory: directory)
            var port = try await process.waitUntilReady()
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1", headers: blocked).status == 403)
            for _ in 0..<20 {
                let response = try await RawHTTP.request(port: port, "GET", "/posts/1", headers: blocked)
                #expect(response.status == 403 && response.errorCode == "account_blocked")
            }
            #expect(upstream.count == 1, "the block is answered locally")
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1", headers: [("X-Account-Id", "acct-2")]).status == 200)
            let listed = try await RawHTTP.request(port: port, "GET", "/-/blocks")
            #expect(listed.text.contains(#""account":"acct-13""#) && listed.text.contains("blocked_at"))
            process.signal(SIGTERM)
            #expect(await process.wait() == 0)
            #expect(process.stderr.components(separatedBy: "account blocked").count - 1 == 1, "logged once")

            // After a restart the block is still there.
            process = try VeneerProcess(arguments, directory: directory)
            port = try await process.waitUntilReady()
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1", headers: blocked).errorCode == "account_blocked")
            #expect(upstream.count == 2, "one more request, for acct-2")

            // veneer unblock through the running instance.
            let unblock = try await VeneerProcess.run(["unblock", "acct-13", "--config", "veneer.yaml"], directory: directory)
            #expect(unblock.status == 0, "\(unblock.stderr)")
            #expect(unblock.stdout.contains("running instance"))
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1", headers: blocked).status == 403)
            #expect(upstream.count == 3, "forwarded again (and blocked again by the upstream)")
            #expect(try await VeneerProcess.run(["unblock", "nobody", "--config", "veneer.yaml"], directory: directory).status == 1)
            process.signal(SIGTERM)
            #expect(await process.wait() == 0)
            #expect(process.stderr.contains("account unblocked"))

            // veneer unblock with no instance running: straight in the store.
            let offline = try await VeneerProcess.run(["unblock", "acct-13", "--config", "veneer.yaml"], directory: directory)
            #expect(offline.status == 0 && offline.stdout.contains("the store"), "\(offline.stderr)")
            process = try VeneerProcess(arguments, directory: directory)
            defer { process.terminate() }
            port = try await process.waitUntilReady()
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1", headers: blocked).status == 403)
            #expect(upstream.count == 4)
        }
    }

    @Test("the rules file is re-read on SIGHUP; a broken one keeps the old rules and says why")
    func rulesReload() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "deny method DELETE\n".write(toFile: directory + "/rules.txt", atomically: true, encoding: .utf8)
        try await withTestUpstream({ _ in .json("{}") }) { (upstream: TestUpstream) async throws in
            try config(directory, upstream: upstream.url).write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
            let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
            defer { process.terminate() }
            let port = try await process.waitUntilReady()
            #expect(try await RawHTTP.request(port: port, "DELETE", "/posts/1").errorCode == "client_blocked")
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").status == 200)

            try "deny route /posts/{id}\n".write(toFile: directory + "/rules.txt", atomically: true, encoding: .utf8)
            process.signal(SIGHUP)
            try await eventually("the new rules refuse /posts/1") { (try? await RawHTTP.request(port: port, "GET", "/posts/1").status) == 403 }
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").errorCode == "client_blocked")
            #expect(try await RawHTTP.request(port: port, "GET", "/posts").status == 200)

            try "deny rout /posts\n".write(toFile: directory + "/rules.txt", atomically: true, encoding: .utf8)
            process.signal(SIGHUP)
            try await eventually("the reload failed") { process.stderr.contains("reload failed") }
            #expect(process.stderr.contains("rules.txt:1:6: unknown rule kind 'rout' (did you mean 'route'?)"))
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").errorCode == "client_blocked", "the old rules keep serving")
            #expect(try await RawHTTP.request(port: port, "GET", "/posts").status == 200)
        }
    }
}

extension BlockListProcessTests {
    @Test("the shipped staging chain puts block_list outside the cache: once a block is learned, a cached answer is refused too")
    func shippedOrder() async throws {
        let state = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: state) }
        try await withTestUpstream({ request in
            request.target == "/posts/2"
                ? .json(#"{"error":"account_blocked"}"#, status: 403)
                : .json(#"{"id":1,"title":"t","body":"b"}"#, headers: [("Cache-Control", "max-age=300")])
        }) { (upstream: TestUpstream) async throws in
            let process = try VeneerProcess(["run", "-e", "staging", "--config", "config/veneer.yaml", "--listen", "127.0.0.1:0"],
                                            directory: packageRoot, environment: ["STATE_DIRECTORY": state, "VENEER_UPSTREAM_URL": upstream.url])
            defer { process.terminate() }
            let port = try await process.waitUntilReady()
            let first = try await RawHTTP.request(port: port, "GET", "/posts/1")
            #expect(first.status == 200 && first.header("Cache-Status")?.contains("stored") == true)
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").header("Cache-Status")?.hasPrefix("veneer; hit") == true)
            // The upstream's own answer, on a miss, teaches the block through the cache.
            let signal = try await RawHTTP.request(port: port, "GET", "/posts/2")
            #expect(signal.status == 403)
            let refused = try await RawHTTP.request(port: port, "GET", "/posts/1")
            #expect(refused.status == 403 && refused.errorCode == "account_blocked", "the cached copy is not served to a blocked account")
            #expect(upstream.count == 2)
            process.signal(SIGTERM)
            #expect(await process.wait() == 0)
        }
    }

    @Test("veneer check warns, with FILE:LINE:COL, about a block_list inside a cache; the shipped file has none")
    func checkWarnsInsideCache() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try """
            environments:
              development:
                origin: { mock: {} }
                chain:
                  - cache: { ttl: 1m }
                  - latency_log
                  - block_list: { learn: { status: 403 } }
            """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        let inside = try await VeneerProcess.run(["check", "--config", "veneer.yaml"], directory: directory)
        #expect(inside.status == 0, "a warning, not an error")
        #expect(inside.stderr.contains("veneer.yaml:7:9: warning: environments.development.chain[2].block_list: block_list stands inside cache (chain[0]): "
            + "a denied client or a blocked account still gets cache's answers (a stale_if_error copy too); put block_list before cache"), "\(inside.stderr)")
        let shipped = try await VeneerProcess.run(["check", "--all", "--config", "config/veneer.yaml"], directory: packageRoot)
        #expect(shipped.status == 0 && !shipped.stderr.contains("block_list stands inside"), "\(shipped.stderr)")
    }
}
