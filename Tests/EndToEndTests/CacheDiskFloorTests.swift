import Foundation
import Testing
import VeneerTestSupport

/// The production layout on a small disk (issue 25 §6): a sqlite cache and the token store
/// share the state directory. The cache keeps `min_free` on the disk, so that the token store
/// can always save; when something else fills the disk the cache gives room back by itself,
/// and a token save that failed for space then succeeds. The real binary on a real tmpfs.
@Suite("a disk cache leaves min_free for the token store (the real binary on a small tmpfs)", .serialized,
       .enabled(if: SmallDisk.canMount, Comment(rawValue: SmallDisk.skipReason)))
struct CacheDiskFloorTests {
    /// A 200 KB post, shareable for an hour, behind the token server's access check.
    static func post(_ request: RecordedRequest, tokens: TestTokenServer) -> UpstreamReply {
        let id = request.target.split(separator: "/").last.map(String.init) ?? "0"
        var reply = tokens.protectedReply(request, body: #"{"id":\#(id),"title":"t","body":""# + String(repeating: "x", count: 200_000) + #""}"#)
        if reply.status == 200 { reply.headers.append(("Cache-Control", "public, max-age=3600")) }
        return reply
    }

    func withSmallDisk(size: String, minFree: String?, _ body: (SmallDisk, TestTokenServer, String) async throws -> Void) async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let disk = try SmallDisk(at: directory + "/state", size: size)
        defer { disk.unmount() }
        var settings = TestTokenServer.Settings()
        settings.expiresIn = 2   // a refresh, and a durable save of its token, every second
        let tokens = try await TestTokenServer.start(settings: settings)
        do {
            try await withTestUpstream({ request in Self.post(request, tokens: tokens) }) { (upstream: TestUpstream) async throws in
                try """
                    state_dir: \(disk.path)
                    stores:
                      local: { sqlite: veneer.sqlite }
                    environments:
                      production:
                        origin: { upstream: { url: "\(upstream.url)" } }
                        chain:
                          - cache: { store: local, ttl: 1h\(minFree.map { ", min_free: \($0)" } ?? "") }
                          - auth_refresh: { token_url: "\(tokens.url)", client_id: veneer, client_secret: s3cret, refresh_token: rt-0, store: local }
                    """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
                try await body(disk, tokens, directory)
            }
            await tokens.stop()
        } catch {
            await tokens.stop()
            throw error
        }
    }

    func start(_ directory: String) async throws -> (VeneerProcess, Int) {
        let process = try VeneerProcess(["run", "--config", "veneer.yaml", "-e", "production", "--listen", "127.0.0.1:0"], directory: directory)
        return (process, try await process.waitUntilReady())
    }

    func problems(_ port: Int) async -> [String] {
        (try? await RawHTTP.request(port: port, "GET", "/-/health").json?["problems"] as? [String]) ?? []
    }

    /// Two more refreshes are granted, so their tokens were saved (a token that cannot be saved
    /// stops refreshing), and health stays clear while they come (looked at all along).
    func tokensKeepSaving(_ port: Int, _ tokens: TestTokenServer) async throws {
        let before = tokens.refreshes
        var problems: [String] = []
        try await eventually("two more refreshes (\(tokens.refreshes - before) so far)") {
            problems = await self.problems(port)
            return !problems.isEmpty || tokens.refreshes >= before + 2
        }
        #expect(problems.isEmpty, "\(problems)")
    }

    @Test("a cache that would fill a 6 MB disk stops at min_free (2 MB): the token store keeps saving, also after a restart")
    func floorKept() async throws {
        try await withSmallDisk(size: "6m", minFree: "2MB") { disk, tokens, directory in
            var (veneer, port) = try await start(directory)
            for id in 1...40 {
                let response = try await RawHTTP.request(port: port, "GET", "/posts/\(id)")
                #expect(response.status == 200, "\(id): \(response.status) \(response.text.prefix(200))")
            }
            // 8 MB of entries were stored on a 6 MB disk: the oldest left, the floor held.
            try await eventually("the floor is kept: \(disk.free) bytes free") { disk.free >= (2 << 20) - (128 << 10) }
            try await tokensKeepSaving(port, tokens)
            let metrics = try await RawHTTP.request(port: port, "GET", "/-/metrics").text
            #expect(metrics.contains(#"veneer_cache_evictions_total{cache="local",reason="min_free"}"#), "\(metrics.prefix(3000))")
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/40").header("Cache-Status")?.hasPrefix("veneer; hit") == true)

            veneer.signal(SIGTERM)
            #expect(await veneer.wait() == 0)
            (veneer, port) = try await start(directory)
            defer { veneer.terminate() }
            try await tokensKeepSaving(port, tokens)
            #expect(tokens.reuses == 0)
        }
    }

    @Test("the default min_free (16MB) is more than a 6 MB disk has: the cache keeps its entries in memory only, and the token store keeps saving")
    func defaultFloor() async throws {
        try await withSmallDisk(size: "6m", minFree: nil) { disk, tokens, directory in
            let (veneer, port) = try await start(directory)
            defer { veneer.terminate() }
            for id in 1...30 {
                #expect(try await RawHTTP.request(port: port, "GET", "/posts/\(id)").status == 200)
            }
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/30").header("Cache-Status")?.hasPrefix("veneer; hit") == true)
            try await tokensKeepSaving(port, tokens)
            #expect(disk.free > 4 << 20, "free: \(disk.free)")
            #expect(veneer.stderr.contains("entries stay in memory only"), "\(veneer.stderr.suffix(2000))")
        }
    }

    @Test("another program fills the disk to the last byte: the cache gives room back by itself, and the token store saves again without anyone acting")
    func filledByAnother() async throws {
        try await withSmallDisk(size: "8m", minFree: "2MB") { disk, tokens, directory in
            let (veneer, port) = try await start(directory)
            defer { veneer.terminate() }
            for id in 1...30 { _ = try await RawHTTP.request(port: port, "GET", "/posts/\(id)") }
            try await tokensKeepSaving(port, tokens)
            let filler = disk.fill()
            #expect(disk.free < 64 << 10)
            // The cache notices within its check interval and evicts; the disk is above the
            // floor again, with the other program's file still there.
            try await eventually("the disk is above the floor again: \(disk.free) bytes free") { disk.free >= (2 << 20) - (128 << 10) }
            #expect(FileManager.default.fileExists(atPath: filler))
            var left: [String] = []
            try await eventually("health is clear (it says \(left))") {
                left = await problems(port)
                return left.isEmpty
            }
            try await tokensKeepSaving(port, tokens)
            #expect(tokens.reuses == 0)
        }
    }
}
