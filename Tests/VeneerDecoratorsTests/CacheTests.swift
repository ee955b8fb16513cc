import Foundation
import HTTPTypes
import NIOCore
import Synchronization
import Testing
import VeneerCore
import VeneerDecorators
import VeneerTestSupport

@Suite("cache: read-through, write-through, invalidation")
struct CacheBehaviourTests {
    @Test("a GET is read through once, then answered from the cache with Age and Cache-Status")
    func readThrough() async throws {
        try await withCache(reply: { _ in post(1) }) { (rig: CacheRig) async throws in
            let first = try await rig.get("/posts/1")
            #expect(first.cacheStatus == "veneer; fwd=uri-miss; fwd-status=200; stored")
            rig.clock.advance(by: .seconds(7))
            let second = try await rig.get("/posts/1")
            #expect(second.text == first.text)
            #expect(second.cacheStatus == "veneer; hit; ttl=53")
            #expect(second.headers[.age] == "7")
            #expect(rig.upstream.count == 1)
        }
    }

    @Test("a fresh hit in memory is answered immediately, as handle answers it; a miss, a stale entry and a write are the rest of the work")
    func answerImmediately() async throws {
        try await withCache(reply: { _ in post(1, headers: [("Cache-Control", "max-age=10")]) }) { (rig: CacheRig) async throws in
            let request = CacheRig.request(.get, "/posts/1")
            guard case .later(let rest) = rig.cache.answerImmediately(request) else {
                Issue.record("a miss was answered without the upstream")
                return
            }
            #expect(rig.upstream.count == 0, "the rest of the work has not run yet")
            let stored = try await rest()
            #expect(stored.cacheStatus == "veneer; fwd=uri-miss; fwd-status=200; stored" && rig.upstream.count == 1)
            rig.clock.advance(by: .seconds(4))
            guard case .answer(let immediate) = rig.cache.answerImmediately(request) else {
                Issue.record("a fresh hit needed waiting")
                return
            }
            let handled = try await rig.cache.handle(request)
            #expect(immediate.status == handled.status && immediate.text == stored.text)
            #expect(immediate.headers == handled.headers)
            #expect(immediate.cacheStatus == "veneer; hit; ttl=6" && immediate.headers[.age] == "4")
            guard case .answer(let head) = rig.cache.answerImmediately(CacheRig.request(.head, "/posts/1")) else {
                Issue.record("a HEAD of a fresh entry needed waiting")
                return
            }
            #expect(head.status == .ok)
            guard case .later = rig.cache.answerImmediately(CacheRig.request(.delete, "/posts/1")) else {
                Issue.record("a write was answered without the upstream")
                return
            }
            #expect(rig.registry.emitToString().contains(#"veneer_cache_requests_total{cache="memory",result="hit"} 3"#),
                    "hits answered immediately are counted")
            rig.clock.advance(by: .seconds(7))
            guard case .later = rig.cache.answerImmediately(request) else {
                Issue.record("a stale entry was answered without revalidation")
                return
            }
            #expect(rig.upstream.count == 1, "work left for later is not done unless run")
        }
    }

    @Test("the X-Request-Id an upstream echoes is not stored: each answer gets its own")
    func requestIDNotStored() async throws {
        try await withCache(reply: { _ in post(1, headers: [("X-Request-Id", "first-request")]) }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1")
            let hit = try await rig.get("/posts/1")
            #expect(hit.cacheStatus.hasPrefix("veneer; hit") && !hit.headers.contains(.xRequestID))
        }
    }

    @Test("an upstream's Server-Timing goes out with the answer that fetched it (a miss, a revalidation) and is never stored: a hit carries none")
    func serverTimingNotStored() async throws {
        try await withCache(reply: { request in
            if request.header("if-none-match") == "\"1-1\"" {
                return UpstreamReply(status: 304, headers: [("ETag", "\"1-1\""), ("Server-Timing", "db;dur=1")], body: "")
            }
            return post(1, headers: [("ETag", "\"1-1\""), ("Cache-Control", "max-age=10"), ("Server-Timing", #"db;desc="posts";dur=5"#)])
        }) { (rig: CacheRig) async throws in
            let miss = try await rig.get("/posts/1")
            #expect(miss.cacheStatus.contains("stored") && miss.headers[values: .serverTiming] == [#"db;desc="posts";dur=5"#])
            let hit = try await rig.get("/posts/1")
            #expect(hit.cacheStatus.hasPrefix("veneer; hit") && !hit.headers.contains(.serverTiming))
            rig.clock.advance(by: .seconds(11))
            let revalidated = try await rig.get("/posts/1")
            #expect(revalidated.cacheStatus.contains("fwd-status=304") && revalidated.headers[values: .serverTiming] == ["db;dur=1"])
            #expect(!(try await rig.get("/posts/1")).headers.contains(.serverTiming), "nor stored from the 304")
        }
    }

    @Test("responses are keyed by path and sorted query")
    func listKeys() async throws {
        try await withCache(reply: { _ in .json("[]") }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts?b=2&a=1")
            _ = try await rig.get("/posts?a=1&b=2")
            #expect(rig.upstream.count == 1)
            _ = try await rig.get("/posts?a=2")
            _ = try await rig.get("/posts")
            #expect(rig.upstream.count == 3)
            #expect(rig.upstream.requests.first?.target == "/posts?b=2&a=1")
            _ = try await rig.get("/posts/1?v=1")
            _ = try await rig.get("/posts/1?v=2")
            _ = try await rig.get("/posts/1?v=1")
            #expect(rig.upstream.count == 5, "the query is part of an item's key too")
        }
    }

    @Test("a created post is written through: the next GET makes no upstream call")
    func writeThroughCreate() async throws {
        try await withCache(reply: { request in
            request.method == "POST" ? .json(#"{"id":42,"title":"new","body":"b"}"#, status: 201, headers: [("Location", "/posts/42")]) : post(0)
        }) { (rig: CacheRig) async throws in
            let created = try await rig.send(.post, "/posts", #"{"title":"new","body":"b"}"#)
            #expect(created.status == .created)
            #expect(created.cacheStatus == "veneer; fwd=request; stored")
            let fetched = try await rig.get("/posts/42")
            #expect(fetched.status == .ok && fetched.text == #"{"id":42,"title":"new","body":"b"}"#)
            #expect(fetched.cacheStatus.hasPrefix("veneer; hit"))
            #expect(rig.upstream.requests.map(\.method) == ["POST"])
        }
    }

    @Test("PUT and PATCH write the new item through and evict every list; DELETE evicts the item and lists")
    func invalidation() async throws {
        let version = Mutex(1)
        try await withCache(reply: { request in
            switch request.method {
            case "PUT", "PATCH": return .json(#"{"id":1,"title":"v2","body":"b"}"#)
            case "DELETE": return UpstreamReply(status: 204, headers: [], body: "")
            default:
                if request.target.hasPrefix("/posts/1") { return post(1, title: "v\(version.withLock { $0 })") }
                return .json("[]")
            }
        }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1")
            _ = try await rig.get("/posts")
            _ = try await rig.get("/posts?userId=1")
            #expect(rig.upstream.count == 3)
            _ = try await rig.send(.put, "/posts/1", #"{"title":"v2","body":"b"}"#)
            #expect(try await rig.get("/posts/1").text.contains("v2"))
            #expect(rig.upstream.count == 4, "the updated item comes from the cache")
            _ = try await rig.get("/posts")
            _ = try await rig.get("/posts?userId=1")
            #expect(rig.upstream.count == 6, "both lists were evicted")
            _ = try await rig.send(.delete, "/posts/1")
            version.withLock { $0 = 3 }
            _ = try await rig.get("/posts/1")
            _ = try await rig.get("/posts")
            #expect(rig.upstream.count == 9)
        }
    }

    @Test("concurrent misses for one key make exactly one upstream request")
    func coalescing() async throws {
        // The first answer is late enough for a loaded run to start all hundred meanwhile.
        try await withCache(reply: { _ in UpstreamReply(headers: [("Content-Type", "application/json")], body: #"{"id":1,"title":"t","body":"b"}"#, delay: .seconds(2)) }) { (rig: CacheRig) async throws in
            let statuses = try await withThrowingTaskGroup(of: String.self) { group in
                for _ in 0..<100 { group.addTask { try await rig.get("/posts/1").cacheStatus } }
                return try await group.reduce(into: [String]()) { $0.append($1) }
            }
            #expect(rig.upstream.count == 1)
            #expect(statuses.count == 100)
            #expect(statuses.filter { $0.contains("collapsed") }.count == 99)
        }
    }

    @Test("least recently used entries go first when max_entries is reached")
    func lruEntries() async throws {
        var options = CacheOptions()
        options.maxEntries = 2
        try await withCache(options, reply: { request in post(Int(request.target.split(separator: "/").last!)!) }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1")
            _ = try await rig.get("/posts/2")
            _ = try await rig.get("/posts/1")  // 2 is now the least recently used
            _ = try await rig.get("/posts/3")  // evicts 2
            #expect(rig.upstream.count == 3)
            _ = try await rig.get("/posts/1")
            _ = try await rig.get("/posts/3")
            #expect(rig.upstream.count == 3)
            _ = try await rig.get("/posts/2")
            #expect(rig.upstream.count == 4)
            #expect(rig.registry.emitToString().contains(#"veneer_cache_evictions_total{cache="memory",reason="lru"} 2"#))
        }
    }

    @Test("max_bytes bounds the memory tier and max_entry_size passes large responses through unstored")
    func byteBounds() async throws {
        var options = CacheOptions()
        options.maxBytes = 2000
        options.maxEntrySize = 1000
        try await withCache(options, reply: { request in
            request.target == "/posts/9" ? .json(String(repeating: "x", count: 1500)) : .json(String(repeating: "y", count: 600))
        }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/9")
            _ = try await rig.get("/posts/9")
            #expect(rig.upstream.count == 2, "too large to store")
            for id in 1...3 { _ = try await rig.get("/posts/\(id)") }
            _ = try await rig.get("/posts/1")
            #expect(rig.upstream.count == 6, "three 600-byte entries do not fit in 2000 bytes with their headers")
        }
    }

    @Test("hit, miss and stale counters are in the metrics")
    func metrics() async throws {
        try await withCache(reply: { _ in post(1) }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1")
            _ = try await rig.get("/posts/1")
            let text = rig.registry.emitToString()
            #expect(text.contains(#"veneer_cache_requests_total{cache="memory",result="hit"} 1"#))
            #expect(text.contains(#"veneer_cache_requests_total{cache="memory",result="miss"} 1"#))
            #expect(text.contains(#"veneer_cache_entries{cache="memory"} 1"#))
        }
    }

    @Test("expired entries are purged")
    func purge() async throws {
        try await withCache(reply: { _ in post(1, headers: [("Cache-Control", "max-age=10")]) }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1")
            rig.clock.advance(by: .seconds(11))
            await rig.cache.purge()
            #expect(rig.registry.emitToString().contains(#"veneer_cache_entries{cache="memory"} 0"#))
        }
    }

    @Test("the purge goes through every entry, a chunk at a time")
    func purgeInChunks() async throws {
        try await withCache(reply: { request in
            let id = Int(request.target.split(separator: "/").last ?? "") ?? 0
            return post(id, headers: [("Cache-Control", id % 2 == 0 ? "max-age=10" : "max-age=100")])
        }) { (rig: CacheRig) async throws in
            for id in 1...1200 { _ = try await rig.get("/posts/\(id)") }  // more than one chunk
            rig.clock.advance(by: .seconds(11))
            await rig.cache.purge()
            #expect(rig.registry.emitToString().contains(#"veneer_cache_entries{cache="memory"} 600"#))
            #expect(try await rig.get("/posts/3").cacheStatus.hasPrefix("veneer; hit"))
            #expect(try await rig.get("/posts/4").cacheStatus.contains("fwd=uri-miss"))
        }
    }
}
