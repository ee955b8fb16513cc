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
        #expect(result.stderr.contains(#"bad.yaml:5:30: environments.development.chain[0].latency_log.slow: "5 minutes" is not a duration (use e.g. 30s, 5m, 1h)"#))
        #expect(result.stderr.contains("bad.yaml:6:9: environments.development.chain[1]: unknown decorator 'lateny_log' (did you mean 'latency_log'?)"))
        #expect(result.stderr.contains("2 configuration errors"))
    }

    @Test("a missing configuration file and a syntax error exit 78 too")
    func checkMissing() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        #expect(try await VeneerProcess.run(["check", "--config", "nope.yaml"], directory: directory).status == 78)
        try "environments: [".write(toFile: directory + "/broken.yaml", atomically: true, encoding: .utf8)
        let broken = try await VeneerProcess.run(["check", "--config", "broken.yaml"], directory: directory)
        #expect(broken.status == 78 && broken.stderr.contains("broken.yaml:2:1: YAML syntax error"))
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

    @Test("decorators and version list what is there")
    func listing() async throws {
        let decorators = try await VeneerProcess.run(["decorators"])
        #expect(decorators.status == 0 && decorators.stdout.contains("latency_log") && decorators.stdout.contains("upstream"))
        for option in ["duration or heuristic: freshness", "heuristic_max", "targeted_fields", "list of field names:", "[Veneer-Cache-Control]", "[1d]"] {
            #expect(decorators.stdout.contains(option), "\(option)")
        }
        let version = try await VeneerProcess.run(["version"])
        #expect(version.status == 0 && version.stdout.hasPrefix("veneer "))
    }

    @Test("with no configuration anywhere, run serves the built-in development environment; SIGTERM exits 0")
    func runBuiltIn() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let process = try VeneerProcess(["run", "--listen", "127.0.0.1:0"], directory: directory)
        defer { process.terminate() }
        let port = try await process.waitUntilReady()
        #expect(try await RawHTTP.request(port: port, "POST", "/posts", body: #"{"title":"t","body":"b"}"#).status == 201)
        let fetched = try await RawHTTP.request(port: port, "GET", "/posts/1")
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
}
