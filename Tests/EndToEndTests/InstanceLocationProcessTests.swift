import Foundation
import Testing
import VeneerTestSupport

/// `reload`, `purge`, `switch` and `unblock` find the instance of their own configuration
/// file and environment, one way for all four, and never act on another file's instance that
/// answers where theirs is configured (a `make run` dev proxy of another checkout).
@Suite("Finding the instance: two real instances of two configuration files")
struct InstanceLocationProcessTests {
    static func yaml(listen: String) -> String {
        """
        state_dir: state
        environments:
          development:
            listen: \(listen)
            origin: { mock: {} }
            chain: [{ cache: { ttl: 1h } }, { block_list: { learn: { status: 403 } } }]
          staging:
            listen: \(listen)
            origin: { mock: {} }
            chain: [latency_log]
        """
    }

    @Test("every command acts on its own file's instance, and refuses (69) or falls back to the store when another file's instance answers")
    func twoInstances() async throws {
        let theirs = try temporaryDirectory(), ours = try temporaryDirectory()
        defer {
            try? FileManager.default.removeItem(atPath: theirs)
            try? FileManager.default.removeItem(atPath: ours)
        }
        let port = try await freePort()
        // Both files configure the same address; theirs runs there.
        for directory in [theirs, ours] {
            try Self.yaml(listen: "127.0.0.1:\(port)").write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        }
        let other = try VeneerProcess(["run", "--config", "veneer.yaml"], directory: theirs)
        defer { other.terminate() }
        #expect(try await other.waitUntilReady() == port)
        #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").header("Cache-Status")?.contains("stored") == true)

        // Ours runs too, elsewhere (port 0: the address it records is the only way to it).
        let own = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: ours)
        let ownPort = try await own.waitUntilReady()
        let reloaded = try await VeneerProcess.run(["reload", "--config", "veneer.yaml"], directory: ours)
        #expect(reloaded.status == 0 && reloaded.stdout.contains("reloaded environment development (chain generation 2)"), "\(reloaded.stderr)")
        let purged = try await VeneerProcess.run(["purge", "--all", "--config", "veneer.yaml"], directory: ours)
        #expect(purged.status == 0 && purged.stdout.contains("the running instance at 127.0.0.1:\(ownPort)"), "\(purged.stdout)\(purged.stderr)")
        own.signal(SIGTERM)
        #expect(await own.wait() == 0)

        // Ours has stopped: its configured address leads to theirs, which none of them may touch.
        let generation = { try await RawHTTP.request(port: port, "GET", "/-/health").json?["chain_generation"] as? Int }
        let refusal = "serves environment development of \(theirs)/veneer.yaml, not environment development of \(ours)/veneer.yaml"
        let reload = try await VeneerProcess.run(["reload", "--config", "veneer.yaml"], directory: ours)
        #expect(reload.status == 69)
        #expect(reload.stderr.contains("veneer reload: the Veneer at 127.0.0.1:\(port) (environment development's configured address; "
            + "no instance of it recorded one in \(ours)/state/run) \(refusal)"), "\(reload.stderr)")
        #expect(try await generation() == 1, "theirs was not reloaded")

        let purge = try await VeneerProcess.run(["purge", "--all", "--config", "veneer.yaml"], directory: ours)
        #expect(purge.status == 0 && purge.stdout.contains("nothing to purge"), "\(purge.stdout)\(purge.stderr)")
        #expect(purge.stdout.contains(refusal), "\(purge.stdout)")
        #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").header("Cache-Status")?.hasPrefix("veneer; hit") == true,
                "theirs keeps its cache")

        let switched = try await VeneerProcess.run(["switch", "staging", "--config", "veneer.yaml"], directory: ours)
        #expect(switched.status == 69 && switched.stderr.contains(refusal), "\(switched.stderr)")
        #expect(try await RawHTTP.request(port: port, "GET", "/-/health").json?["environment"] as? String == "development")

        let unblock = try await VeneerProcess.run(["unblock", "veneer", "--config", "veneer.yaml"], directory: ours)
        #expect(unblock.status == 1 && unblock.stderr.contains(refusal), "\(unblock.stderr)")

        // Their file, another environment: what serves there is named, no stale address file suggested.
        let otherEnvironment = try await VeneerProcess.run(["reload", "--config", "veneer.yaml", "-e", "staging"], directory: theirs)
        #expect(otherEnvironment.status == 69)
        #expect(otherEnvironment.stderr.contains("serves environment development of \(theirs)/veneer.yaml, not environment staging of \(theirs)/veneer.yaml"),
                "\(otherEnvironment.stderr)")
        #expect(!otherEnvironment.stderr.contains("stale"))

        // Their own commands still reach theirs.
        let theirReload = try await VeneerProcess.run(["reload", "--config", "veneer.yaml"], directory: theirs)
        #expect(theirReload.status == 0, "\(theirReload.stderr)")
        #expect(try await generation() == 2)
        other.signal(SIGTERM)
        #expect(await other.wait() == 0)
    }

    @Test("with no instance running the messages say so: switch to an environment with errors, reload of an environment nobody serves")
    func noInstance() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await withRefusingPort { (refusing: Int) async throws in
            try (Self.yaml(listen: "127.0.0.1:\(refusing)") + "\n  bad:\n    origin: { mock: {} }\n    chain: [{ latency_log: { slow: soon } }]\n")
                .write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
            let bad = try await VeneerProcess.run(["switch", "bad", "--config", "veneer.yaml"], directory: directory)
            #expect(bad.status == 78)
            #expect(bad.stderr.contains("veneer switch: not switched: environment bad of veneer.yaml has errors\n"), "\(bad.stderr)")
            #expect(!bad.stderr.contains("keeps serving"), "no instance runs to keep serving anything")
            let reload = try await VeneerProcess.run(["reload", "--config", "veneer.yaml", "-e", "staging"], directory: directory)
            #expect(reload.status == 69)
            #expect(reload.stderr.contains("veneer reload: no Veneer answers at 127.0.0.1:\(refusing) (environment staging's configured address; "
                + "no instance of it recorded one in \(directory)/state/run)"), "\(reload.stderr)")
            #expect(!reload.stderr.contains("stale"), "no address file exists to be stale")
        }
    }
}
