import Foundation
import HTTPTypes
import NIOCore
import Synchronization
import Testing
import VeneerCore
import VeneerDecorators
import VeneerTestSupport

/// Range requests through the cache (RFC 9110 §14, RFC 9111 §3.3-3.4), against an upstream
/// that supports ranges.
@Suite("cache: range requests and stored parts (RFC 9110 §14, RFC 9111 §3.3-3.4)")
struct CacheRangeTests {
    static let text = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN"  // 50 bytes

    @Test("RFC 9110 §14.2: one range of a stored complete response is answered 206 with Content-Range, without the upstream", arguments: [
        ("bytes=0-9", "0123456789", "bytes 0-9/50"), ("bytes=45-", "JKLMN", "bytes 45-49/50"), ("bytes=-5", "JKLMN", "bytes 45-49/50"),
        ("BYTES=10-14", "abcde", "bytes 10-14/50"), ("bytes=40-99", "EFGHIJKLMN", "bytes 40-49/50"),
    ])
    func rangeOfStored(_ range: String, _ body: String, _ contentRange: String) async throws {
        try await withCache(reply: { request in ranged(request, body: Self.text) }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1")
            let part = try await rig.get("/posts/1", headers: [.range: range])
            #expect(part.status == .partialContent && part.text == body)
            #expect(part.headers[.contentRange] == contentRange)
            #expect(part.cacheStatus.hasPrefix("veneer; hit"))
            #expect(rig.upstream.count == 1)
        }
    }

    @Test("RFC 9110 §14.2: several ranges, an unsatisfiable one, a bad one or another unit get the whole 200; HEAD ignores Range", arguments: [
        "bytes=0-1,5-6", "bytes=60-70", "bytes=9-2", "items=0-1", "bytes=x-",
    ])
    func wholeInstead(_ range: String) async throws {
        try await withCache(reply: { request in ranged(request, body: Self.text) }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1")
            let whole = try await rig.get("/posts/1", headers: [.range: range])
            #expect(whole.status == .ok && whole.text == Self.text && !whole.headers.contains(.contentRange))
            let head = try await rig.send(.head, "/posts/1", headers: [.range: "bytes=0-9"])
            #expect(head.status == .ok && !head.headers.contains(.contentRange))
            #expect(rig.upstream.count == 1)
        }
    }

    @Test("RFC 9110 §13.1.5: If-Range applies the range only for the stored strong entity tag or a strong Last-Modified", arguments: [
        ("\"r1\"", true), ("\"r2\"", false), ("W/\"r1\"", false), ("LM", true), ("LM+1", false), ("garbage", false),
    ])
    func ifRange(_ condition: String, _ partial: Bool) async throws {
        let date = Date()
        let modified = date.addingTimeInterval(-3600)
        try await withCache(start: date, reply: { request in
            ranged(request, body: Self.text, headers: [("Cache-Control", "max-age=600"), ("Date", HTTPDate.format(date)), ("Last-Modified", HTTPDate.format(modified))])
        }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1")
            let value = condition == "LM" ? HTTPDate.format(modified) : condition == "LM+1" ? HTTPDate.format(modified.addingTimeInterval(1)) : condition
            let answer = try await rig.get("/posts/1", headers: [.range: "bytes=0-4", .ifRange: value])
            #expect(answer.status == (partial ? .partialContent : .ok))
            #expect(answer.text == (partial ? "01234" : Self.text))
            #expect(rig.upstream.count == 1)
        }
    }

    @Test("RFC 9111 §3.3: on a miss the range is forwarded, and the 206 is stored to answer the same range again")
    func partStored() async throws {
        try await withCache(reply: { request in ranged(request, body: Self.text) }) { (rig: CacheRig) async throws in
            let first = try await rig.get("/posts/1", headers: [.range: "bytes=10-19"])
            #expect(first.status == .partialContent && first.text == "abcdefghij" && first.headers[.contentRange] == "bytes 10-19/50")
            #expect(rig.upstream.requests.first?.header("range") == "bytes=10-19")
            let inside = try await rig.get("/posts/1", headers: [.range: "bytes=12-15"])
            #expect(inside.status == .partialContent && inside.text == "cdef" && inside.headers[.contentRange] == "bytes 12-15/50")
            #expect(inside.cacheStatus.hasPrefix("veneer; hit"))
            #expect(rig.upstream.count == 1)
            let whole = try await rig.get("/posts/1")
            #expect(whole.status == .ok && whole.text == Self.text && whole.cacheStatus.contains("fwd=partial"), "a part never answers a whole request")
            #expect(rig.upstream.requests.last?.header("range") == nil)
        }
    }

    @Test("RFC 9111 §3.4: parts that share a strong validator are combined into the complete response once they cover it")
    func partsCombined() async throws {
        try await withCache(reply: { request in ranged(request, body: Self.text) }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1", headers: [.range: "bytes=0-19"])
            _ = try await rig.get("/posts/1", headers: [.range: "bytes=30-"])
            let across = try await rig.get("/posts/1", headers: [.range: "bytes=15-35"])
            #expect(across.status == .partialContent && across.text == "fghijklmnopqrstuvwxyz")
            #expect(rig.upstream.count == 3, "no stored part held 15-35")
            let whole = try await rig.get("/posts/1")
            #expect(whole.status == .ok && whole.text == Self.text && whole.cacheStatus.hasPrefix("veneer; hit"))
            #expect(rig.upstream.count == 3)
        }
    }

    @Test("RFC 9111 §3.4: parts with different validators, or a weak one, are never combined")
    func partsNotCombined() async throws {
        let version = Mutex(1)
        try await withCache(reply: { request in
            let tag = version.withLock { $0 } == 1 ? "\"v1\"" : "\"v2\""
            return ranged(request, body: Self.text, etag: request.target.hasSuffix("/2") ? "W/\"v1\"" : tag)
        }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1", headers: [.range: "bytes=0-24"])
            version.withLock { $0 = 2 }
            _ = try await rig.get("/posts/1", headers: [.range: "bytes=25-49"])
            _ = try await rig.get("/posts/1")
            #expect(rig.upstream.count == 3, "the two parts are of different representations")
            _ = try await rig.get("/posts/2", headers: [.range: "bytes=0-24"])
            _ = try await rig.get("/posts/2", headers: [.range: "bytes=0-24"])
            #expect(rig.upstream.count == 5, "a part with a weak validator is not stored")
        }
    }

    @Test("RFC 9111 §3.3: a part of a response larger than max_entry_size is not stored; a HEAD miss with Range fetches the whole")
    func partBounds() async throws {
        var options = CacheOptions()
        options.maxEntrySize = 40
        try await withCache(options, reply: { request in ranged(request, body: Self.text) }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1", headers: [.range: "bytes=0-9"])
            _ = try await rig.get("/posts/1", headers: [.range: "bytes=0-9"])
            #expect(rig.upstream.count == 2)
        }
        try await withCache(reply: { request in ranged(request, body: Self.text) }) { (rig: CacheRig) async throws in
            let head = try await rig.send(.head, "/posts/1", headers: [.range: "bytes=0-9"])
            #expect(head.status == .ok && rig.upstream.requests.first?.header("range") == nil && rig.upstream.requests.first?.method == "GET")
            #expect(try await rig.get("/posts/1").cacheStatus.hasPrefix("veneer; hit"))
        }
    }

    @Test("RFC 9111 §3.1: a stored 200 keeps the Content-Range it came with on a hit (a stored part's is made per hit; a range of the 200 gets its own)")
    func contentRangeOfAWhole() async throws {
        try await withCache(reply: { _ in post(1, headers: [("Cache-Control", "max-age=600"), ("Content-Range", "bytes 0-1/2")]) }) { (rig: CacheRig) async throws in
            #expect(try await rig.get("/posts/1").headers[values: .contentRange] == ["bytes 0-1/2"])
            let hit = try await rig.get("/posts/1")
            #expect(hit.cacheStatus.hasPrefix("veneer; hit"))
            #expect(hit.headers[values: .contentRange] == ["bytes 0-1/2"])
            let part = try await rig.get("/posts/1", headers: [.range: "bytes=0-1"])
            #expect(part.status == .partialContent && part.headers[values: .contentRange].count == 1)
            #expect(part.headers[.contentRange]?.hasPrefix("bytes 0-1/") == true && part.headers[.contentRange] != "bytes 0-1/2")
            #expect(rig.upstream.count == 1)
        }
    }
}
