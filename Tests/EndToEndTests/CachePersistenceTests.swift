import Foundation
import Testing
import VeneerTestSupport

@Suite("cache with a sqlite store, across real process restarts")
struct CachePersistenceTests {
    func config(_ directory: String, upstream: String) -> String {
        """
        state_dir: \(directory)/state
        stores:
          local: { sqlite: cache.sqlite }
        environments:
          development:
            origin: { upstream: { url: "\(upstream)" } }
            chain:
              - cache: { store: local, ttl: 1h }
        """
    }

    func start(_ directory: String) async throws -> (VeneerProcess, Int) {
        let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
        return (process, try await process.waitUntilReady())
    }

    @Test("entries survive a clean restart and a kill -9")
    func restart() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await withTestUpstream({ request in post(Int(request.target.split(separator: "/").last!) ?? 0) }) { (upstream: TestUpstream) async throws in
            try config(directory, upstream: upstream.url).write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)

            var (process, port) = try await start(directory)
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").header("Cache-Status")?.contains("stored") == true)
            process.signal(SIGTERM)
            #expect(await process.wait() == 0)

            (process, port) = try await start(directory)
            let afterRestart = try await RawHTTP.request(port: port, "GET", "/posts/1")
            #expect(afterRestart.header("Cache-Status")?.hasPrefix("veneer; hit") == true)
            #expect(afterRestart.json?["id"] as? Int == 1)
            _ = try await RawHTTP.request(port: port, "GET", "/posts/2")
            // The write to the store is asynchronous, in the cache's queue of store operations;
            // the admin API's look at the store runs behind it in that queue, so once it answers
            // the write is done.
            #expect(try await RawHTTP.request(port: port, "GET", "/-/cache?path=/posts/2").status == 200)
            process.signal(SIGKILL)
            _ = await process.wait()

            (process, port) = try await start(directory)
            defer { process.terminate() }
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/2").header("Cache-Status")?.hasPrefix("veneer; hit") == true)
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").header("Cache-Status")?.hasPrefix("veneer; hit") == true)
            #expect(upstream.count == 2)
            #expect(try await RawHTTP.request(port: port, "GET", "/-/health").status == 200)
            process.signal(SIGTERM)
            #expect(await process.wait() == 0)
        }
    }

    @Test("a corrupt cache file is reported and replaced, never fatal")
    func corruptFile() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory + "/state", withIntermediateDirectories: true)
        try Data(repeating: 0x5A, count: 16384).write(to: URL(fileURLWithPath: directory + "/state/cache.sqlite"))
        try await withTestUpstream({ _ in post(1) }) { (upstream: TestUpstream) async throws in
            try config(directory, upstream: upstream.url).write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
            let (process, port) = try await start(directory)
            defer { process.terminate() }
            _ = try await RawHTTP.request(port: port, "GET", "/posts/1")
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").header("Cache-Status")?.hasPrefix("veneer; hit") == true)
            #expect(process.stderr.contains("sqlite store file is unusable"))
            let files = try FileManager.default.contentsOfDirectory(atPath: directory + "/state")
            #expect(files.contains { $0.hasPrefix("cache.sqlite.corrupt-") })
        }
    }

    @Test("veneer purge: through the running instance, and in the store when none runs")
    func purge() async throws {
        // The configured address refuses connections: with no instance running, nothing
        // else (whatever listens on 8080) is asked.
        try await withRefusingPort { refusing in try await purge(refusing: refusing) }
    }

    func purge(refusing: Int) async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await withTestUpstream({ request in post(Int(request.target.split(separator: "/").last!) ?? 0) }) { (upstream: TestUpstream) async throws in
            try config(directory, upstream: upstream.url)
                .replacingOccurrences(of: "  development:\n", with: "  development:\n    listen: 127.0.0.1:\(refusing)\n")
                .write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
            var (process, port) = try await start(directory)
            for id in 1...3 { _ = try await RawHTTP.request(port: port, "GET", "/posts/\(id)") }

            let online = try await VeneerProcess.run(["purge", "/posts/1", "--config", "veneer.yaml"], directory: directory)
            #expect(online.status == 0, "\(online.stderr)")
            #expect(online.stdout.contains("purged /posts/1: 1 stored key (the running instance at 127.0.0.1:\(port))"), "\(online.stdout)")
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").header("Cache-Status")?.contains("fwd=uri-miss") == true)
            process.signal(SIGTERM)
            #expect(await process.wait() == 0)

            let offline = try await VeneerProcess.run(["purge", "/posts/2", "--config", "veneer.yaml"], directory: directory)
            #expect(offline.status == 0 && offline.stdout.contains("purged /posts/2: 1 stored key (the store)"), "\(offline.stdout) \(offline.stderr)")

            (process, port) = try await start(directory)
            defer { process.terminate() }
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/2").header("Cache-Status")?.contains("fwd=uri-miss") == true)
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/3").header("Cache-Status")?.hasPrefix("veneer; hit") == true)
            let all = try await VeneerProcess.run(["purge", "--all", "--config", "veneer.yaml"], directory: directory)
            #expect(all.status == 0 && all.stdout.contains("purged every cached response"), "\(all.stdout)")
            #expect(try await VeneerProcess.run(["purge", "/etc/passwd", "--config", "veneer.yaml"], directory: directory).status == 64)
            #expect(try await VeneerProcess.run(["purge", "--config", "veneer.yaml"], directory: directory).status == 64)
        }
    }
}

func post(_ id: Int) -> UpstreamReply {
    .json(#"{"id":\#(id),"title":"t","body":"b"}"#, headers: [("Cache-Control", "max-age=3600")])
}
