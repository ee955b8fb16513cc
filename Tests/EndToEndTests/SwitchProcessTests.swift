import Foundation
import Testing
import VeneerTestSupport

@Suite("veneer switch: another environment of the same file, live, in the real binary")
struct SwitchProcessTests {
    /// development and staging cache with the same options; `broken` fails only when built
    /// (a missing secret file), `bad` already when read.
    static func yaml(directory: String, stagingListen: String, developmentChain: String = "[{cache: {ttl: 1h}}]") -> String {
        """
        state_dir: \(directory)/state
        environments:
          development:
            listen: 127.0.0.1:0
            origin: { mock: {} }
            chain: \(developmentChain)
          staging:
            listen: \(stagingListen)
            origin: { mock: {} }
            chain: [latency_log, {cache: {ttl: 1h}}]
          broken:
            origin: { mock: {} }
            chain:
              - auth_refresh: { token_url: "http://127.0.0.1:9/t", client_id: x, client_secret_file: missing, refresh_token: r }
          bad:
            origin: { mock: {} }
            chain: [{ latency_log: { slow: soon } }]
        """
    }

    @Test("veneer switch swaps the running instance, which is then found by its new environment: 0, 78 with every error, 69 when none answers")
    func switchCommand() async throws {
        try await withRefusingPort { refusing in try await switchCommand(refusing: refusing) }
    }

    /// staging's configured address refuses connections, development's is port 0: once an
    /// address file is gone, nothing answers for that environment, whatever runs on 8080.
    func switchCommand(refusing: Int) async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try Self.yaml(directory: directory, stagingListen: "127.0.0.1:\(refusing)").write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        let runDirectory = directory + "/state/run"
        func recorded() throws -> [String] { try FileManager.default.contentsOfDirectory(atPath: runDirectory).sorted() }
        let process = try VeneerProcess(["run", "--config", "veneer.yaml", "-e", "development"], directory: directory)
        defer { process.terminate() }
        let port = try await process.waitUntilReady()
        #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").header("Cache-Status")?.contains("stored") == true)
        #expect(try recorded() == ["development.admin"])

        let switched = try await VeneerProcess.run(["switch", "staging", "--config", "veneer.yaml", "-e", "development"], directory: directory)
        #expect(switched.status == 0, "\(switched.stderr)")
        #expect(switched.stdout.contains("switched to environment staging (was development; chain generation 2)"))
        #expect(switched.stderr.contains("warning: listen addresses cannot change on a switch (still 127.0.0.1:0); restart to move them"))
        // Same listener; the cache's entries came along (same options).
        let cached = try await RawHTTP.request(port: port, "GET", "/posts/1")
        #expect(cached.header("Cache-Status")?.hasPrefix("veneer; hit") == true, "\(cached.header("Cache-Status") ?? "none")")
        let health = try await RawHTTP.request(port: port, "GET", "/-/health")
        #expect(health.json?["environment"] as? String == "staging")
        #expect(try recorded() == ["staging.admin"])

        // Found under its new name; no longer under the old one.
        let reloaded = try await VeneerProcess.run(["reload", "--config", "veneer.yaml", "-e", "staging"], directory: directory)
        #expect(reloaded.status == 0, "\(reloaded.stderr)")
        #expect(reloaded.stdout.contains("reloaded environment staging (chain generation 3)"))
        #expect(try await VeneerProcess.run(["reload", "--config", "veneer.yaml", "-e", "development"], directory: directory).status == 69)

        // Refused by the instance when it builds the chain: every error, nothing changes.
        let refused = try await VeneerProcess.run(["switch", "broken", "--config", "veneer.yaml", "-e", "staging"], directory: directory)
        #expect(refused.status == 78)
        #expect(refused.stderr.contains("environments.broken.chain[0].auth_refresh: secret file \(directory)/missing does not exist"), "\(refused.stderr)")
        #expect(refused.stderr.contains("switch to environment broken failed (1 configuration error); staging keeps serving"))
        // Errors this command sees itself: the instance is not asked.
        let bad = try await VeneerProcess.run(["switch", "bad", "--config", "veneer.yaml", "-e", "staging"], directory: directory)
        #expect(bad.status == 78)
        #expect(bad.stderr.contains("veneer switch: not switched: environment bad of veneer.yaml has errors; the running instance keeps serving staging"))
        #expect(bad.stderr.contains(#"environments.bad.chain[0].latency_log.slow: "soon" is not a duration"#))
        let unknown = try await VeneerProcess.run(["switch", "stagign", "--config", "veneer.yaml", "-e", "staging"], directory: directory)
        #expect(unknown.status == 78)
        #expect(unknown.stderr.contains("no environment 'stagign'"), "\(unknown.stderr)")
        #expect(try await RawHTTP.request(port: port, "GET", "/-/health").json?["chain_generation"] as? Int == 3)

        // The environment named with -e must be the one serving.
        let stale = try await VeneerProcess.run(["switch", "staging", "--config", "veneer.yaml", "-e", "development"], directory: directory)
        #expect(stale.status == 69)
        #expect(stale.stderr.contains("veneer switch: no Veneer answers at 127.0.0.1:0 (environment development's configured address; no instance of it recorded one in"),
                "\(stale.stderr)")

        let back = try await VeneerProcess.run(["switch", "development", "--config", "veneer.yaml", "-e", "staging"], directory: directory)
        #expect(back.status == 0, "\(back.stderr)")
        #expect(back.stdout.contains("switched to environment development (was staging; chain generation 4)"))
        let again = try await VeneerProcess.run(["switch", "development", "--config", "veneer.yaml", "-e", "development"], directory: directory)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout.contains("environment development already serves (chain generation 4); nothing was rebuilt"))
        #expect(try recorded() == ["development.admin"])

        process.signal(SIGTERM)
        #expect(await process.wait() == 0)
        #expect(try recorded() == [])
        let none = try await VeneerProcess.run(["switch", "staging", "--config", "veneer.yaml"], directory: directory)
        #expect(none.status == 69)
        #expect(none.stderr.contains("no Veneer answers"))
    }

    @Test("an -e environment that no longer decodes is still found through the address file its instance recorded")
    func servingEnvironmentBroken() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try Self.yaml(directory: directory, stagingListen: "127.0.0.1:0").write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        let process = try VeneerProcess(["run", "--config", "veneer.yaml", "-e", "development"], directory: directory)
        defer { process.terminate() }
        let port = try await process.waitUntilReady()
        let nowhere = try await VeneerProcess.run(["switch", "staging", "--config", "veneer.yaml", "-e", "bad"], directory: directory)
        #expect(nowhere.status == 69)
        #expect(nowhere.stderr.contains("veneer switch: no Veneer serving environment bad of veneer.yaml was found (no instance of environment bad recorded its address in "),
                "\(nowhere.stderr)")

        // The developer broke the environment serving, and switches away from it.
        try Self.yaml(directory: directory, stagingListen: "127.0.0.1:0", developmentChain: "[{ latency_log: { slow: soon } }]")
            .write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        let switched = try await VeneerProcess.run(["switch", "staging", "--config", "veneer.yaml", "-e", "development"], directory: directory)
        #expect(switched.status == 0, "\(switched.stderr)")
        #expect(try await RawHTTP.request(port: port, "GET", "/-/health").json?["environment"] as? String == "staging")
        process.signal(SIGTERM)
        #expect(await process.wait() == 0)
    }

    @Test("STATUS= names the environment switched to, and SIGHUP then reloads that one")
    func notifyAfterSwitch() async throws {
        try await withRefusingPort { refusing in
            let directory = try temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let socket = try NotifySocket(directory: directory)
            try Self.yaml(directory: directory, stagingListen: "127.0.0.1:\(refusing)").write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
            let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory,
                                            environment: ["NOTIFY_SOCKET": socket.path])
            defer { process.terminate() }
            let port = try await process.waitUntilReady()
            try await eventually("READY=1 names development") { socket.messages.contains { $0.contains("READY=1") && $0.contains("STATUS=serving development") } }

            let switched = try await RawHTTP.request(port: port, "POST", "/-/environment", headers: [("Content-Type", "application/json")],
                                                     body: #"{"environment":"staging"}"#)
            #expect(switched.status == 200, "\(switched.text)")
            try await eventually("the switch to staging is announced") { socket.messages.contains { $0.contains("STATUS=serving staging on 127.0.0.1:0: latency_log -> cache -> mock (generation 2)") } }

            // A reload reads the environment serving now, not the one the process started with.
            process.signal(SIGHUP)
            try await eventually("the reload of staging is announced") { socket.messages.contains { $0.contains("STATUS=serving staging") && $0.contains("(generation 3)") } }
            #expect(try await RawHTTP.request(port: port, "GET", "/-/health").json?["environment"] as? String == "staging")

            let failed = try await RawHTTP.request(port: port, "POST", "/-/environment", body: #"{"environment":"broken"}"#)
            #expect(failed.status == 422)
            try await eventually("the failed switch is announced") { socket.messages.contains { $0.contains("STATUS=switch to broken failed (1 problem: ") && $0.contains("serving staging") } }
            process.signal(SIGTERM)
            #expect(await process.wait() == 0)
        }
    }

    @Test("curl -d '{\"environment\":...}' (JSON under curl's default form type) switches; the same body posted by a page of another site is refused 403")
    func switchWithCurl() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try Self.yaml(directory: directory, stagingListen: "127.0.0.1:0").write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        let process = try VeneerProcess(["run", "--config", "veneer.yaml"], directory: directory)
        defer { process.terminate() }
        let port = try await process.waitUntilReady()
        let body = #"{"environment":"staging"}"#
        let curlType = ("Content-Type", "application/x-www-form-urlencoded")
        // A web page's form posting the same bytes: what the edge refuses, before the body is read.
        for page in [[("Origin", "http://evil.example"), ("Sec-Fetch-Site", "cross-site")], [("Sec-Fetch-Site", "cross-site")],
                     [("Origin", "http://127.0.0.1:\(port)"), ("Sec-Fetch-Site", "same-site")]] {
            let refused = try await RawHTTP.request(port: port, "POST", "/-/environment", headers: [curlType] + page, body: body)
            #expect(refused.status == 403 && refused.errorCode == "cross_site_refused", "\(page): \(refused.status)")
        }
        #expect(try await RawHTTP.request(port: port, "GET", "/-/health").json?["environment"] as? String == "development")
        let curl = try await RawHTTP.request(port: port, "POST", "/-/environment", headers: [curlType, ("User-Agent", "curl/8.5.0")], body: body)
        #expect(curl.status == 200, "\(curl.text)")
        #expect(curl.json?["status"] as? String == "switched" && curl.json?["environment"] as? String == "staging")
        process.signal(SIGTERM)
        #expect(await process.wait() == 0)
    }

    @Test("under systemd (INVOCATION_ID) a switch is refused with what to do instead")
    func refusedUnderSystemd() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try Self.yaml(directory: directory, stagingListen: "127.0.0.1:0").write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        let process = try VeneerProcess(["run", "--config", "veneer.yaml"], directory: directory,
                                        environment: ["INVOCATION_ID": "5f1e2d3c4b5a69788796a5b4c3d2e1f0"])
        defer { process.terminate() }
        let port = try await process.waitUntilReady()
        let answer = try await RawHTTP.request(port: port, "POST", "/-/environment", body: #"{"environment":"staging"}"#)
        #expect(answer.status == 409 && answer.errorCode == "managed_by_systemd")
        #expect(answer.json?["message"] as? String == "the instance name is the environment under systemd: systemctl start veneer@staging")
        let command = try await VeneerProcess.run(["switch", "staging", "--config", "veneer.yaml", "-e", "development"], directory: directory)
        #expect(command.status == 1)
        #expect(command.stderr.contains("veneer switch: the instance name is the environment under systemd: systemctl start veneer@staging"))
        #expect(try await RawHTTP.request(port: port, "GET", "/-/health").json?["environment"] as? String == "development")
        process.signal(SIGTERM)
        #expect(await process.wait() == 0)
    }
}
