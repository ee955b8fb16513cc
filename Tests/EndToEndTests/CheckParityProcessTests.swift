import Foundation
import Testing
import VeneerTestSupport

/// What `veneer run` refuses before it serves (exit 78), `veneer check` finds, at the line and
/// column of the key. The reasons, found in the run path (`failWithConfigError`: the file, its
/// decoding, the access log, the first chain's build: stores, files, secrets):
/// - a file that is missing or is not YAML;
/// - any problem of decoding (a number out of range, an unknown key, ...);
/// - an access log that cannot be opened;
/// - a store: postgres with an unknown `sslmode`, a `pool_size` below 3, a store named `memory`;
/// - a file a decorator writes (a latency log, a HAR file) that cannot be opened;
/// - a seed, rules file or HAR file to replay that cannot be read (decoded, so checked);
/// - a secret file that cannot be read, a token store that cannot be written: `check`
///   warns (exit 0; a machine that checks seldom holds the credentials, README).
/// `--listen` is `run`'s own option; a port in use exits 69, not 78.
@Suite("check finds what run refuses, as real processes")
struct CheckParityProcessTests {
    struct Reason: Sendable, CustomStringConvertible {
        let name: String
        /// The environment under `development:`; `D` is the test's directory.
        let environment: String
        /// Top-level lines after `environments`.
        var topLevel = ""
        /// What `check` prints: `veneer.yaml:LINE:COL: error:` (or `warning:`).
        let found: String
        var description: String { name }
    }

    static let reasons: [Reason] = [
        Reason(name: "a duration past what nanoseconds hold (it ended check with SIGILL)",
               environment: "origin: { mock: {} }\n    chain: [{ cache: { ttl: 9300000000s } }]",
               found: "veneer.yaml:4:29: error: environments.development.chain[0].cache.ttl: 9300000000s is out of range (0s...365d)"),
        Reason(name: "a YAML syntax error", environment: "origin: { mock: {}", found: "veneer.yaml:"),
        Reason(name: "an unknown key", environment: "origin: { mock: {} }\n    chian: []", found: "veneer.yaml:4:5: error: environments.development.chian"),
        Reason(name: "an access log that cannot be opened (a folder)", environment: "origin: { mock: {} }\n    access_log: D",
               found: "veneer.yaml:4:17: error: environments.development.access_log: cannot open the access log D: Is a directory"),
        Reason(name: "an access log under a file", environment: "origin: { mock: {} }\n    access_log: D/file/x/access.log",
               found: "veneer.yaml:4:17: error: environments.development.access_log: cannot open the access log D/file/x/access.log: Not a directory"),
        Reason(name: "postgres with sslmode=bogus", environment: "origin: { mock: {} }\n    chain: [{ cache: { store: shared } }]",
               topLevel: "stores:\n  shared: { postgres: \"postgres://veneer@127.0.0.1:9/veneer?sslmode=bogus\" }",
               found: "veneer.yaml:2:23: error: stores.shared.postgres: unknown sslmode 'bogus'"),
        Reason(name: "postgres with a pool_size below 3", environment: "origin: { mock: {} }\n    chain: [{ cache: { store: shared } }]",
               topLevel: "stores:\n  shared: { postgres: { url: \"postgres://veneer@127.0.0.1:9/veneer?pool_size=2\" } }",
               found: "veneer.yaml:2:30: error: stores.shared.postgres.url: pool_size '2' is not a number from 3 to 1000"),
        Reason(name: "a store named memory", environment: "origin: { mock: {} }", topLevel: "stores:\n  memory: { sqlite: m.sqlite }",
               found: "veneer.yaml:2:3: error: stores.memory: 'memory' is built in"),
        Reason(name: "a latency log that cannot be opened", environment: "origin: { mock: {} }\n    chain: [{ latency_log: { file: D/file/latency.log } }]",
               found: "veneer.yaml:4:36: error: environments.development.chain[0].latency_log.file: cannot open D/file/latency.log: Not a directory"),
        Reason(name: "a HAR file that is a folder", environment: "origin: { mock: {} }\n    chain: [{ record: { file: D/folder.har } }]",
               found: "veneer.yaml:4:31: error: environments.development.chain[0].record.file: cannot open D/folder.har: Is a directory"),
        Reason(name: "a HAR file under a file", environment: "origin: { mock: {} }\n    chain: [{ record: { file: D/file/r.har } }]",
               found: "veneer.yaml:4:31: error: environments.development.chain[0].record.file: cannot open D/file/r.har: Not a directory"),
        Reason(name: "a seed that does not exist", environment: "origin: { mock: { seed: D/none.json } }",
               found: "veneer.yaml:3:29: error: environments.development.origin.mock.seed: seed file D/none.json does not exist"),
        Reason(name: "a HAR file to replay that does not exist", environment: "origin: { replay: { file: D/none.har } }",
               found: "veneer.yaml:3:"),
        Reason(name: "a rules file that does not exist", environment: "origin: { mock: {} }\n    chain: [{ block_list: { rules_file: D/none.rules } }]",
               found: "veneer.yaml:4:41: error: environments.development.chain[0].block_list.rules_file: rules file D/none.rules does not exist"),
        Reason(name: "a secret file that cannot be read (a warning)",
               environment: "origin: { mock: {} }\n    chain: [{ auth_refresh: { token_url: \"http://127.0.0.1:9/t\", client_id: c, client_secret_file: D/none, refresh_token: r } }]",
               found: "warning: environments.development.chain[0].auth_refresh.client_secret_file: secret file D/none does not exist"),
        Reason(name: "a token store that cannot be written (a warning)",
               environment: "origin: { mock: {} }\n    chain: [{ auth_refresh: { token_url: \"http://127.0.0.1:9/t\", client_id: c, client_secret: s, refresh_token: r } }]",
               topLevel: "state_dir: D/file",
               found: "warning: environments.development.chain[0].auth_refresh: the token store D/file/auth_refresh cannot be written"),
    ]

    @Test("each reason run exits 78 for, check finds with FILE:LINE:COL", arguments: reasons)
    func parity(_ reason: Reason) async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "not a folder".write(toFile: directory + "/file", atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(atPath: directory + "/folder.har", withIntermediateDirectories: false)
        let top = reason.topLevel.isEmpty ? "" : reason.topLevel.replacingOccurrences(of: "D", with: directory) + "\n"
        let yaml = top + "environments:\n  development:\n    " + reason.environment.replacingOccurrences(of: "D", with: directory) + "\n"
        try yaml.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        let found = reason.found.replacingOccurrences(of: "D", with: directory)
        let warning = found.hasPrefix("warning:")

        let check = try await VeneerProcess.run(["check", "--config", "veneer.yaml"], directory: directory)
        #expect(check.status == (warning ? 0 : 78), "\(check.stderr)")
        #expect(check.stderr.contains(found), "check says:\n\(check.stderr)\nexpected: \(found)\n\(yaml)")
        #expect(warning || check.stderr.contains("veneer.yaml:"), "every error has its place")
        let all = try await VeneerProcess.run(["check", "--all", "--config", "veneer.yaml"], directory: directory)
        #expect(all.status == check.status, "check --all: \(all.stderr)")

        let run = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
        defer { run.terminate() }
        let status = await run.wait(timeout: .seconds(20))
        #expect(status == 78, "run: \(run.stderr)")
    }

    @Test("a resource declared body: stream in a chain that reads bodies whole (the mock origin): check warns at the body key's place and exits 0; run serves and logs the same warning")
    func streamedBodiesReadWhole() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let yaml = "environments:\n  development:\n    origin: { mock: {} }\n    resources: [posts, { name: uploads, body: stream }]\n"
        try yaml.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        let found = "veneer.yaml:4:47: warning: environments.development.resources[1].body: bodies are read whole anyway (up to limits.request_body): mock reads request bodies whole"
        let check = try await VeneerProcess.run(["check", "--config", "veneer.yaml"], directory: directory)
        #expect(check.status == 0, "\(check.stderr)")
        #expect(check.stderr.contains(found), "check says:\n\(check.stderr)")
        let run = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
        defer { run.terminate() }
        _ = try await run.waitUntilReady()
        #expect(run.stderr.contains("warning: environments.development.resources[1].body: bodies are read whole anyway"), "run logs: \(run.stderr)")
    }

    @Test("a configuration file that is missing: both exit 78 without a place (there is none)")
    func missingFile() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let check = try await VeneerProcess.run(["check", "--config", "none.yaml"], directory: directory)
        let run = try await VeneerProcess.run(["run", "--config", "none.yaml"], directory: directory)
        #expect(check.status == 78 && run.status == 78)
        #expect(check.stderr.contains("veneer: error: none.yaml: configuration file does not exist"), "\(check.stderr)")
    }

    @Test("--threads and VENEER_THREADS out of 1...1024 are refused with a message, not taken or trapped on")
    func threads() async throws {
        for arguments in [["--threads", "0"], ["--threads", "99999999999999999999"], ["--threads", "1025"], ["--threads=-1"]] {
            let result = try await VeneerProcess.run(["run"] + arguments)
            #expect(result.status == 64 && result.stderr.contains("is not a number of threads from 1 to 1024"), "\(arguments): \(result.stderr)")
        }
        let variable = try await VeneerProcess.run(["run"], environment: ["VENEER_THREADS": "9223372036854775808"])
        #expect(variable.status == 64 && variable.stderr.contains("VENEER_THREADS"), "\(variable.stderr)")
    }
}
