import Foundation
import HTTPTypes
import NIOCore
import Synchronization
import Testing
import VeneerCore
import VeneerDecorators
import VeneerTestSupport

@Suite("cache: RFC 9111 rules of a shared cache")
struct CacheHTTPSemanticsTests {
    @Test("freshness comes from s-maxage, then max-age, then Expires, then ttl", arguments: [
        ([("Cache-Control", "max-age=100, s-maxage=20")], 20),
        ([("Cache-Control", "max-age=100")], 100),
        ([("Expires", "EXPIRES+30"), ("Date", "DATE")], 30),
        ([], 60),
    ] as [([(String, String)], Int)])
    func freshness(_ headers: [(String, String)], _ seconds: Int) async throws {
        let now = Date()
        let resolved = headers.map { name, value in
            (name, value.replacingOccurrences(of: "EXPIRES+30", with: HTTPDate.format(now.addingTimeInterval(30)))
                .replacingOccurrences(of: "DATE", with: HTTPDate.format(now)))
        }
        try await withCache(start: now, reply: { _ in post(1, headers: resolved) }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1")
            rig.clock.advance(by: .seconds(seconds - 2))
            _ = try await rig.get("/posts/1")
            #expect(rig.upstream.count == 1)
            rig.clock.advance(by: .seconds(4))
            _ = try await rig.get("/posts/1")
            #expect(rig.upstream.count == 2)
        }
    }

    @Test("ttl_override replaces the upstream's freshness")
    func override() async throws {
        var options = CacheOptions()
        options.ttlOverride = .seconds(300)
        try await withCache(options, reply: { _ in post(1, headers: [("Cache-Control", "max-age=5")]) }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1")
            rig.clock.advance(by: .seconds(200))
            _ = try await rig.get("/posts/1")
            #expect(rig.upstream.count == 1)
        }
    }

    @Test("an upstream Age counts against freshness, and the Age sent is the corrected age")
    func age() async throws {
        try await withCache(reply: { _ in post(1, headers: [("Cache-Control", "max-age=60"), ("Age", "50")]) }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1")
            rig.clock.advance(by: .seconds(5))
            let hit = try await rig.get("/posts/1")
            #expect(hit.headers[.age] == "55")
            rig.clock.advance(by: .seconds(6))
            _ = try await rig.get("/posts/1")
            #expect(rig.upstream.count == 2)
        }
    }

    @Test("never stores no-store, private, Set-Cookie or Vary: *", arguments: [
        ("Cache-Control", "no-store"), ("Cache-Control", "private, max-age=60"), ("Set-Cookie", "s=1"), ("Vary", "*"),
    ])
    func notStored(_ name: String, _ value: String) async throws {
        try await withCache(reply: { _ in post(1, headers: [(name, value)]) }) { (rig: CacheRig) async throws in
            let first = try await rig.get("/posts/1")
            #expect(!first.cacheStatus.contains("stored"))
            _ = try await rig.get("/posts/1")
            #expect(rig.upstream.count == 2)
        }
    }

    @Test("only statuses the RFC allows are stored by default", arguments: [(200, true), (404, true), (410, true), (500, false), (503, false), (302, false), (201, false)])
    func statuses(_ status: Int, _ stored: Bool) async throws {
        try await withCache(reply: { _ in UpstreamReply(status: status, headers: [("Content-Type", "application/json")], body: "{}") }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1")
            _ = try await rig.get("/posts/1")
            #expect(rig.upstream.count == (stored ? 1 : 2))
        }
    }

    @Test("no-cache is stored but revalidated every time, with the stored validator")
    func noCache() async throws {
        try await withCache(reply: { request in
            request.header("if-none-match") == "\"v1\"" ? UpstreamReply(status: 304, headers: [("ETag", "\"v1\"")], body: "")
                : post(1, headers: [("Cache-Control", "no-cache"), ("ETag", "\"v1\"")])
        }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1")
            let second = try await rig.get("/posts/1")
            #expect(second.status == .ok && second.text.contains("\"id\":1"))
            #expect(second.cacheStatus == "veneer; fwd=stale; fwd-status=304")
            #expect(rig.upstream.requests.map { $0.header("if-none-match") } == [nil, "\"v1\""])
        }
    }

    @Test("a stale entry is revalidated with If-None-Match / If-Modified-Since and refreshed on 304")
    func revalidation() async throws {
        let modified = HTTPDate.format(Date().addingTimeInterval(-3600))
        try await withCache(reply: { request in
            if request.header("if-none-match") == "\"abc\"" {
                return UpstreamReply(status: 304, headers: [("ETag", "\"abc\""), ("Cache-Control", "max-age=30"), ("X-Refreshed", "yes")], body: "")
            }
            return post(1, headers: [("Cache-Control", "max-age=30"), ("ETag", "\"abc\""), ("Last-Modified", modified)])
        }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1")
            rig.clock.advance(by: .seconds(31))
            let revalidated = try await rig.get("/posts/1")
            #expect(revalidated.status == .ok && revalidated.text.contains("\"id\":1"))
            #expect(revalidated.headers[HTTPField.Name("X-Refreshed")!] == "yes")
            let conditional = try #require(rig.upstream.requests.last)
            #expect(conditional.header("if-none-match") == "\"abc\"")
            #expect(conditional.header("if-modified-since") == modified)
            rig.clock.advance(by: .seconds(20))
            _ = try await rig.get("/posts/1")
            #expect(rig.upstream.count == 2, "fresh again for 30s after the 304")
        }
    }

    @Test("a client's matching If-None-Match is answered 304 from the cache")
    func clientConditional() async throws {
        try await withCache(reply: { _ in post(1, headers: [("ETag", "W/\"x1\"")]) }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1")
            let notModified = try await rig.get("/posts/1", headers: [.ifNoneMatch: "\"x0\", \"x1\""])
            #expect(notModified.status == .notModified && notModified.body.readableBytes == 0)
            #expect(notModified.headers[.eTag] == "W/\"x1\"")
            let changed = try await rig.get("/posts/1", headers: [.ifNoneMatch: "\"other\""])
            #expect(changed.status == .ok)
            // A miss with the client's validators still fetches a full response.
            let miss = try await rig.get("/posts/2", headers: [.ifNoneMatch: "W/\"x1\""])
            #expect(miss.status == .notModified)
            #expect(rig.upstream.requests.last?.header("if-none-match") == nil)
        }
    }

    @Test("responses are keyed by the request headers named in Vary")
    func vary() async throws {
        try await withCache(reply: { request in
            post(1, title: request.header("accept-language") ?? "none", headers: [("Vary", "Accept-Language")])
        }) { (rig: CacheRig) async throws in
            #expect(try await rig.get("/posts/1", headers: [.acceptLanguage: "de"]).text.contains("\"de\""))
            #expect(try await rig.get("/posts/1", headers: [.acceptLanguage: "fr"]).text.contains("\"fr\""))
            #expect(try await rig.get("/posts/1", headers: [.acceptLanguage: "de"]).text.contains("\"de\""))
            #expect(try await rig.get("/posts/1", headers: [.acceptLanguage: "fr"]).text.contains("\"fr\""))
            #expect(rig.upstream.count == 2)
        }
    }

    @Test("a response stored for one caller's Authorization or Cookie is never given to another")
    func credentials() async throws {
        try await withCache(reply: { request in
            post(1, title: request.header("authorization") ?? request.header("cookie") ?? "anonymous",
                 headers: [("Cache-Control", "public, max-age=60")])
        }) { (rig: CacheRig) async throws in
            #expect(try await rig.get("/posts/1", headers: [.authorization: "Bearer alice"]).text.contains("alice"))
            #expect(try await rig.get("/posts/1", headers: [.authorization: "Bearer bob"]).text.contains("bob"))
            #expect(try await rig.get("/posts/1").text.contains("anonymous"))
            #expect(try await rig.get("/posts/1", headers: [.cookie: "session=carol"]).text.contains("carol"))
            #expect(rig.upstream.count == 4)
            #expect(try await rig.get("/posts/1", headers: [.authorization: "Bearer alice"]).text.contains("alice"))
            #expect(rig.upstream.count == 4, "alice's own entry is reused")
        }
    }

    @Test("with Authorization, only explicitly shareable responses are stored (RFC 9111 §3.5)")
    func authorizationNeedsPublic() async throws {
        try await withCache(reply: { _ in post(1) }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1", headers: [.authorization: "Bearer a"])
            _ = try await rig.get("/posts/1", headers: [.authorization: "Bearer a"])
            #expect(rig.upstream.count == 2)
        }
    }

    @Test("stale_if_error serves the stale copy when the upstream fails, marked in Cache-Status")
    func staleIfError() async throws {
        var options = CacheOptions()
        options.staleIfError = .seconds(3600)
        let failing = Mutex(false)
        try await withCache(options, reply: { _ in
            failing.withLock { $0 } ? UpstreamReply(status: 503, body: "{}") : post(1, headers: [("Cache-Control", "max-age=10")])
        }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1")
            failing.withLock { $0 = true }
            rig.clock.advance(by: .seconds(60))
            let stale = try await rig.get("/posts/1")
            #expect(stale.status == .ok && stale.text.contains("\"id\":1"))
            #expect(stale.cacheStatus == "veneer; fwd=stale; fwd-status=503; ttl=-50; detail=stale-if-error")
            rig.clock.advance(by: .seconds(3600))
            #expect(try await rig.get("/posts/1").status == .serviceUnavailable, "beyond the window the error passes")
        }
    }

    @Test("stale_if_error also covers an upstream that is gone, but not must-revalidate responses")
    func staleIfUnreachable() async throws {
        var options = CacheOptions()
        options.staleIfError = .seconds(600)
        try await withCache(options, reply: { request in
            request.target == "/posts/2" ? post(2, headers: [("Cache-Control", "max-age=10, must-revalidate")]) : post(1, headers: [("Cache-Control", "max-age=10")])
        }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1")
            _ = try await rig.get("/posts/2")
            await rig.upstream.stop()
            rig.clock.advance(by: .seconds(30))
            #expect(try await rig.get("/posts/1").cacheStatus.contains("detail=stale-if-error"))
            await #expect(throws: ProxyError.self) { _ = try await rig.get("/posts/2") }
        }
    }

    @Test("stale_while_revalidate answers at once and refreshes in the background")
    func staleWhileRevalidate() async throws {
        var options = CacheOptions()
        options.staleWhileRevalidate = .seconds(30)
        let version = Mutex(1)
        try await withCache(options, reply: { _ in
            post(1, title: "v\(version.withLock { v in defer { v += 1 }; return v })", headers: [("Cache-Control", "max-age=10")])
        }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1")
            rig.clock.advance(by: .seconds(15))
            let stale = try await rig.get("/posts/1")
            #expect(stale.text.contains("v1") && stale.cacheStatus.contains("detail=stale-while-revalidate"))
            // While the refresh runs, readers keep getting the stale copy without another refresh.
            var fresh = try await rig.get("/posts/1")
            try await eventually("the background refresh stored v2") {
                fresh = try await rig.get("/posts/1")
                return fresh.text.contains("v2")
            }
            #expect(fresh.text.contains("v2") && fresh.cacheStatus.hasPrefix("veneer; hit"))
            #expect(rig.upstream.count == 2)
        }
    }

    @Test("HEAD is answered from a stored GET")
    func head() async throws {
        try await withCache(reply: { _ in post(1) }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1")
            let head = try await rig.send(.head, "/posts/1")
            #expect(head.status == .ok && head.cacheStatus.hasPrefix("veneer; hit"))
            #expect(rig.upstream.count == 1)
        }
    }
}
