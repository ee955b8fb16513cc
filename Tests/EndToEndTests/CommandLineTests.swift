import Foundation
import Testing
import VeneerTestSupport

let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

@Suite("The veneer command, run as a real process")
struct CommandLineTests {
    @Test("check accepts the shipped configuration, every environment")
    func checkShipped() async throws {
        let result = try await VeneerProcess.run(["check", "--all", "--config", "config/veneer.yaml"], directory: packageRoot)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("OK"))
    }

    @Test("check reports every error with file:line:column and exits 78")
    func checkErrors() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try """
            environments:
              development:
                origin: { mock: {} }
                chain:
                  - latency_log: { slow: 5 minutes }
                  - lateny_log
            """.write(toFile: directory + "/bad.yaml", atomically: true, encoding: .utf8)
        let result = try await VeneerProcess.run(["check", "--config", "bad.yaml"], directory: directory)
        #expect(result.status == 78)
        #expect(result.stderr.contains(#"bad.yaml:5:30: error: environments.development.chain[0].latency_log.slow: "5 minutes" is not a duration (use e.g. 30s, 5m, 1h)"#))
        #expect(result.stderr.contains("bad.yaml:6:9: error: environments.development.chain[1]: unknown decorator 'lateny_log' (did you mean 'latency_log'?)"))
        #expect(result.stderr.contains("2 configuration errors"))
    }

    @Test("a missing configuration file and a syntax error exit 78 too")
    func checkMissing() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        #expect(try await VeneerProcess.run(["check", "--config", "nope.yaml"], directory: directory).status == 78)
        try "environments: [".write(toFile: directory + "/broken.yaml", atomically: true, encoding: .utf8)
        let broken = try await VeneerProcess.run(["check", "--config", "broken.yaml"], directory: directory)
        #expect(broken.status == 78 && broken.stderr.contains("broken.yaml:2:1: error: YAML syntax error"))
    }

    @Test("check warns about a secret file it cannot read, and still exits 0")
    func checkWarnsUnreadableSecret() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try """
            environments:
              development:
                origin: { mock: {} }
                chain:
                  - auth_refresh: { token_url: "http://127.0.0.1:9/token", client_id: x, client_secret_file: missing, refresh_token: r }
            """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        let result = try await VeneerProcess.run(["check", "--config", "veneer.yaml"], directory: directory)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains(
            "veneer.yaml:5:98: warning: environments.development.chain[0].auth_refresh.client_secret_file: secret file \(directory)/missing does not exist"))
        #expect(result.stderr.contains("1 warning"))
        #expect(result.stdout.contains("environment development OK"))
    }

    @Test("chain --json prints the resolved environment, extends applied")
    func chainJSON() async throws {
        let result = try await VeneerProcess.run(["chain", "-e", "staging", "--json", "--config", "config/veneer.yaml"], directory: packageRoot)
        #expect(result.status == 0, "\(result.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(json["environment"] as? String == "staging")
        let upstream = (json["origin"] as? [String: Any])?["upstream"] as? [String: Any]
        #expect(upstream?["url"] as? String == "https://staging.api.example.com")
        #expect(upstream?["timeout"] as? String == "10s")
    }

    @Test("the shipped configuration traces development and staging, not production; chain shows it")
    func shippedTrace() async throws {
        for (environment, trace) in [("development", true), ("staging", true), ("production", false)] {
            let result = try await VeneerProcess.run(["chain", "-e", environment, "--json", "--config", "config/veneer.yaml"], directory: packageRoot)
            let json = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
            #expect(json["trace"] as? Bool == trace, "\(environment)")
        }
        let text = try await VeneerProcess.run(["chain", "-e", "production", "--config", "config/veneer.yaml"], directory: packageRoot)
        #expect(text.stdout.contains("trace        off"))
    }

    @Test("decorators and version list what is there")
    func listing() async throws {
        let decorators = try await VeneerProcess.run(["decorators"])
        #expect(decorators.status == 0 && decorators.stdout.contains("latency_log") && decorators.stdout.contains("upstream"))
        for option in ["duration or heuristic: freshness", "heuristic_max", "targeted_fields", "list of field names:", "[Veneer-Cache-Control]", "[1d]"] {
            #expect(decorators.stdout.contains(option), "\(option)")
        }
        let version = try await VeneerProcess.run(["version"])
        #expect(version.status == 0)
        let lines = version.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 3 && lines[0].wholeMatch(of: /veneer [0-9]+\.[0-9]+\.[0-9]+/) != nil, "\(version.stdout)")
        #expect(lines.count == 3 && lines[1] == "Licensed under the Apache License, Version 2.0 (Apache-2.0).")
        // `--version` says the same; the license is in the help (and so in the manual page).
        let flag = try await VeneerProcess.run(["--version"])
        #expect(flag.status == 0 && flag.stdout == version.stdout)
        let help = try await VeneerProcess.run(["--help"])
        #expect(help.stdout.contains("Apache License, Version 2.0"))
    }

    @Test("with no configuration anywhere, run serves the built-in development environment; SIGTERM exits 0")
    func runBuiltIn() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let process = try VeneerProcess(["run", "--listen", "127.0.0.1:0"], directory: directory)
        defer { process.terminate() }
        let port = try await process.waitUntilReady()
        // The sample posts of config/fixtures/posts.json, built in.
        let sample = try await RawHTTP.request(port: port, "GET", "/posts/1")
        #expect(sample.json?["title"] as? String == "Hello, Veneer")
        let created = try await RawHTTP.request(port: port, "POST", "/posts", body: #"{"title":"t","body":"b"}"#)
        #expect(created.status == 201 && created.json?["id"] as? Int == 6)
        let fetched = try await RawHTTP.request(port: port, "GET", "/posts/6")
        #expect(fetched.json?["title"] as? String == "t")
        process.signal(SIGTERM)
        #expect(await process.wait() == 0)
        #expect(process.stdout.contains(#""route":"/posts/{id}""#))
    }

    @Test("run with a broken configuration exits 78 before listening")
    func runBroken() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "environments: {development: {origin: {mock: {seed: missing.json}}}}".write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        let result = try await VeneerProcess.run(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
        #expect(result.status == 78)
        #expect(result.stderr.contains("seed file \(directory)/missing.json does not exist"))
    }

    @Test("run exits 78 too on a problem found while building the first chain (a secret that cannot be read)")
    func runBrokenWhileBuilding() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory + "/secret", withIntermediateDirectories: true)
        try """
            environments:
              development:
                origin: { mock: {} }
                chain:
                  - auth_refresh: { token_url: "http://127.0.0.1:9/token", client_id: x, client_secret_file: secret, refresh_token: r }
            """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        let result = try await VeneerProcess.run(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
        #expect(result.status == 78)
        #expect(result.stderr.contains("chain[0].auth_refresh: secret file \(directory)/secret is not readable"))
        #expect(!result.stderr.contains("veneer ready"))
    }

    @Test("veneer reload finds the running instance, reloads it and says how it went: 0, 78 with every error, 69 when none runs")
    func reloadCommand() async throws {
        try await withRefusingPort { refusing in try await reloadCommand(refusing: refusing) }
    }

    /// The configured listen address refuses connections: once the instance has stopped (and
    /// removed its address file), `veneer reload` finds nobody there, whatever runs on 8080.
    func reloadCommand(refusing: Int) async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func write(_ chain: String) throws {
            try "state_dir: \(directory)/state\nenvironments:\n  development:\n    listen: 127.0.0.1:\(refusing)\n    origin: { mock: {} }\n    chain: \(chain)\n"
                .write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        }
        try write("[]")
        let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
        defer { process.terminate() }
        let port = try await process.waitUntilReady()

        try write("[latency_log]")
        let reloaded = try await VeneerProcess.run(["reload", "--config", "veneer.yaml", "-e", "development"], directory: directory)
        #expect(reloaded.status == 0, "\(reloaded.stderr)")
        #expect(reloaded.stdout.contains("reloaded environment development (chain generation 2)"))
        _ = try await RawHTTP.request(port: port, "GET", "/posts")
        try await eventually("the reloaded chain's latency_log line") { process.stdout.contains(#""route":"/posts""#) }

        // Valid to read, refused by the instance when it builds the chain.
        try write(#"[{ auth_refresh: { token_url: "http://127.0.0.1:9/t", client_id: x, client_secret_file: missing, refresh_token: r } }]"#)
        let refused = try await VeneerProcess.run(["reload", "--config", "veneer.yaml"], directory: directory)
        #expect(refused.status == 78)
        #expect(refused.stderr.contains(
            "veneer.yaml:6:15: error: environments.development.chain[0].auth_refresh: secret file \(directory)/missing does not exist"), "\(refused.stderr)")
        #expect(refused.stderr.contains("reload of environment development failed (1 configuration error); the previous configuration keeps serving"))

        // An error this command sees itself: the instance is not asked.
        try write("[{ latency_log: { slow: soon } }]")
        let broken = try await VeneerProcess.run(["reload", "--config", "veneer.yaml"], directory: directory)
        #expect(broken.status == 78)
        #expect(broken.stderr.contains("veneer reload: not reloaded: veneer.yaml has errors; the running instance keeps its configuration"))
        #expect(broken.stderr.contains(#"veneer.yaml:6:36: error: environments.development.chain[0].latency_log.slow: "soon" is not a duration"#))
        #expect(try await RawHTTP.request(port: port, "GET", "/-/health").json?["chain_generation"] as? Int == 2)

        process.signal(SIGTERM)
        #expect(await process.wait() == 0)
        try write("[]")
        let none = try await VeneerProcess.run(["reload", "--config", "veneer.yaml"], directory: directory)
        #expect(none.status == 69)
        #expect(none.stderr.contains("no Veneer answers at 127.0.0.1:\(refusing)"))
    }

    @Test("usage errors exit 64")
    func usage() async throws {
        #expect(try await VeneerProcess.run(["bogus"]).status == 64)
        #expect(try await VeneerProcess.run(["run", "--listen", "nonsense"]).status == 64)
    }

    @Test("an address already taken is named, and exits 69")
    func addressTaken() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = try VeneerProcess(["run", "--listen", "127.0.0.1:0"], directory: directory)
        defer { first.terminate() }
        let port = try await first.waitUntilReady()
        let second = try await VeneerProcess.run(["run", "--listen", "127.0.0.1:\(port)"], directory: directory)
        #expect(second.status == 69)
        #expect(second.stderr.contains("veneer: cannot listen on 127.0.0.1:\(port): the address is already in use"), "\(second.stderr)")
    }

    @Test("the shipped staging environment starts without credentials")
    func stagingWithoutCredentials() async throws {
        let state = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: state) }
        let check = try await VeneerProcess.run(["check", "-e", "staging", "--config", "config/veneer.yaml"], directory: packageRoot)
        #expect(check.status == 0 && !check.stderr.contains("warning"), "\(check.stderr)")
        let process = try VeneerProcess(["run", "-e", "staging", "--config", "config/veneer.yaml", "--listen", "127.0.0.1:0"],
                                        directory: packageRoot, environment: ["STATE_DIRECTORY": state])
        defer { process.terminate() }
        let port = try await process.waitUntilReady()
        #expect(try await RawHTTP.request(port: port, "GET", "/-/health").json?["environment"] as? String == "staging")
        process.signal(SIGTERM)
        #expect(await process.wait() == 0)
    }
}

extension CommandLineTests {
    @Test("relative paths resolve against the configuration file's folder: the shipped development environment runs from any directory")
    func pathsFollowTheFile() async throws {
        let elsewhere = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: elsewhere) }
        let shipped = packageRoot + "/config/veneer.yaml"
        let check = try await VeneerProcess.run(["check", "--all", "--config", shipped], directory: elsewhere)
        #expect(check.status == 0, "\(check.stderr)")
        let process = try VeneerProcess(["run", "--config", shipped, "--listen", "127.0.0.1:0"], directory: elsewhere,
                                        environment: ["STATE_DIRECTORY": elsewhere + "/state"])
        defer { process.terminate() }
        let port = try await process.waitUntilReady()
        let post = try await RawHTTP.request(port: port, "GET", "/posts/1")
        #expect(post.json?["title"] as? String == "Hello, Veneer", "seeded from config/fixtures/posts.json")
        process.signal(SIGTERM)
        #expect(await process.wait() == 0)
    }

    @Test("seed, rules_file, log files, a recording and state_dir in a file elsewhere mean that file's folder, not the working directory")
    func everyRelativePath() async throws {
        let folder = try temporaryDirectory()
        let elsewhere = try temporaryDirectory()
        defer {
            try? FileManager.default.removeItem(atPath: folder)
            try? FileManager.default.removeItem(atPath: elsewhere)
        }
        try #"[{"id":7,"title":"seeded","body":"b"}]"#.write(toFile: folder + "/posts.json", atomically: true, encoding: .utf8)
        try "deny route /posts/13\n".write(toFile: folder + "/rules.txt", atomically: true, encoding: .utf8)
        try """
            state_dir: state
            stores:
              local: { sqlite: veneer.sqlite }
            environments:
              development:
                access_log: logs/access.log
                origin: { mock: { seed: posts.json } }
                chain:
                  - latency_log: { file: logs/latency.log }
                  - record: { file: recordings/dev.har }
                  - block_list: { rules_file: rules.txt, store: local }
            """.write(toFile: folder + "/veneer.yaml", atomically: true, encoding: .utf8)
        let check = try await VeneerProcess.run(["check", "--config", folder + "/veneer.yaml"], directory: elsewhere)
        #expect(check.status == 0, "\(check.stderr)")
        let process = try VeneerProcess(["run", "--config", folder + "/veneer.yaml", "--listen", "127.0.0.1:0"], directory: elsewhere)
        defer { process.terminate() }
        let port = try await process.waitUntilReady()
        #expect(try await RawHTTP.request(port: port, "GET", "/posts/7").json?["title"] as? String == "seeded")
        #expect(try await RawHTTP.request(port: port, "GET", "/posts/13").errorCode == "client_blocked")
        #expect(FileManager.default.fileExists(atPath: folder + "/state/run/development.admin"))
        // Found from yet another directory, through the address file under the file's state_dir.
        let reload = try await VeneerProcess.run(["reload", "--config", folder + "/veneer.yaml"], directory: "/")
        #expect(reload.status == 0, "\(reload.stderr)")
        process.signal(SIGTERM)
        #expect(await process.wait() == 0)
        for written in ["logs/access.log", "logs/latency.log", "recordings/dev.har", "state/veneer.sqlite"] {
            #expect(FileManager.default.fileExists(atPath: folder + "/" + written), "\(written)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere).isEmpty, "nothing in the working directory")
    }
}
