import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HTTPTypes
import NIOCore
import Testing
@testable import VeneerCore
@testable import VeneerDecorators
@testable import VeneerHTTP1
import VeneerTestSupport

/// Entries whose answers came with the same header fields share one storage of them
/// (``SharedHeadersPool``): answers stay byte for byte what each entry's own fields give.
@Suite("cache: entries share equal header fields")
struct CacheSharedHeadersTests {
    /// One `Date` for every answer of a test run (as within one second), and the next second's.
    static let date = HTTPDate.format(Date()), nextDate = HTTPDate.format(Date().addingTimeInterval(1))
    /// nginx's head for a `return 200` location: no validator, the same for every resource
    /// but for `Date`.
    static let head: [(String, String)] = [("Server", "nginx"), ("Date", date), ("Cache-Control", "public, max-age=3600")]

    static func storage(_ response: ProxyResponse) -> HeaderStorage? {
        guard case .shared(let storage, _) = response.headers.wire else { return nil }
        return storage
    }

    /// The answer as the server writes it, without the fields a hit appends (its `Age` and
    /// `Cache-Status`, which the tests compare apart).
    static func written(_ response: ProxyResponse) -> String {
        var stored = response
        if case .shared(let storage, _) = response.headers.wire { stored.headers = ProxyHeaders(base: .shared(storage)) }
        var buffer = ByteBuffer()
        HTTP1ResponseWriter.write(stored, method: .get, close: false, date: "Thu, 01 Jan 1970 00:00:00 GMT", into: &buffer)
        return String(buffer: buffer)
    }

    @Test("two items with the same head share its storage; each hit answers its own body and length, byte for byte")
    func equalHeadsShare() async throws {
        try await withCache(reply: { request in
            let id = Int(request.target.split(separator: "/").last ?? "") ?? 0
            return .json(#"{"id":\#(id),"title":"\#(String(repeating: "t", count: id))"}"#, headers: Self.head)
        }) { cache in
            let missed = [try await cache.get("/posts/1"), try await cache.get("/posts/22")]
            let hits = [try await cache.get("/posts/1"), try await cache.get("/posts/22")]
            #expect(hits.allSatisfy { $0.cacheStatus.hasPrefix("veneer; hit") } && cache.upstream.count == 2)
            let first = try #require(Self.storage(hits[0])), second = try #require(Self.storage(hits[1]))
            #expect(first === second, "the second entry keeps the first one's fields")
            for (hit, (id, title)) in zip(hits, [(1, "t"), (22, String(repeating: "t", count: 22))]) {
                let body = #"{"id":\#(id),"title":"\#(title)"}"#
                #expect(Self.written(hit) == "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nServer: nginx\r\n"
                    + "Date: \(Self.date)\r\nCache-Control: public, max-age=3600\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
            }
            // The miss that was stored answers as its entry does.
            #expect(zip(missed, hits).allSatisfy { Self.written($0) == Self.written($1) })
            // Each entry still counts the fields it shares, as if it held them alone.
            let stored = try #require(cache.cache.storage.memoryLookup(CacheKey.make(CacheRig.request(.get, "/posts/22")), request: [:], range: nil)?.entry)
            #expect(stored.size == stored.body.readableBytes + stored.headers.textSize + 160)
        }
    }

    @Test("an entry removed leaves the fields it shared to the entries that share them")
    func removalKeepsShared() async throws {
        try await withCache(reply: { request in
            .json(#"{"at":"\#(request.target)"}"#, headers: Self.head)
        }) { cache in
            _ = try await cache.get("/posts/1")
            _ = try await cache.get("/posts/2")
            let before = Self.written(try await cache.get("/posts/2"))
            _ = await cache.cache.storage.invalidate(prefixes: [CacheKey.itemPrefix(.posts, "1")])
            #expect(try await cache.get("/posts/1").cacheStatus.contains("fwd=uri-miss"))
            let after = try await cache.get("/posts/2")
            #expect(after.cacheStatus.hasPrefix("veneer; hit") && Self.written(after) == before)
            #expect(before.hasSuffix("\r\n\r\n{\"at\":\"/posts/2\"}") && before.contains("Server: nginx\r\nDate: \(Self.date)\r\n"))
        }
    }

    @Test("heads that differ (an ETag each, another Date) share nothing, and answer their own")
    func differentHeadsDoNot() async throws {
        try await withCache(reply: { request in
            let id = request.target.split(separator: "/").last.map(String.init) ?? ""
            let date = id == "3" ? Self.nextDate : Self.date
            let tag = id == "3" ? [] : [("ETag", "\"v\(id)\"")]
            return .json("{}", headers: [("Date", date), ("Cache-Control", "max-age=60")] + tag)
        }) { cache in
            for path in ["/posts/1", "/posts/2", "/posts/3"] { _ = try await cache.get(path) }
            let hits = [try await cache.get("/posts/1"), try await cache.get("/posts/2"), try await cache.get("/posts/3")]
            let storages = try hits.map { try #require(Self.storage($0)) }
            #expect(storages[0] !== storages[1] && storages[1] !== storages[2] && storages[0] !== storages[2])
            #expect(hits.map { $0.headers[.eTag] } == ["\"v1\"", "\"v2\"", nil])
            #expect(hits.map { $0.headers[.date] } == [Self.date, Self.date, Self.nextDate])
        }
    }

    @Test("the pool: fields held as they came are shared when equal in every fact the writer reads; fields made here never")
    func pool() throws {
        func parsed(_ text: String, method: HTTPRequest.Method = .get) throws -> ProxyHeaders {
            var parser = HTTP1ResponseParser(maxBodySize: 1 << 20)
            parser.append(ByteBuffer(string: text))
            return try #require(try parser.next(requestMethod: method)).response.headers.sharedCopy(removing: [])
        }
        var pool = SharedHeadersPool()
        let one = try parsed("HTTP/1.1 200 OK\r\nServer: nginx\r\nDate: d\r\nContent-Length: 2\r\n\r\n{}")
        let firstTime = pool.sharing(one), secondTime = pool.sharing(one)
        #expect(firstTime == nil, "the first is kept")
        #expect(secondTime == nil, "the same storage is not shared with itself")
        let two = try parsed("HTTP/1.1 200 OK\r\nServer: nginx\r\nDate: d\r\nContent-Length: 4\r\n\r\n{\"\"}")
        let sharedTwo = pool.sharing(two)
        let shared = try #require(sharedTwo)
        guard case .shared(let kept, _) = shared.wire, case .shared(let first, _) = one.wire else {
            Issue.record("not held in shared storage")
            return
        }
        #expect(kept === first && shared.fields == two.fields)
        // A HEAD answer's declared length is one of the facts: not shared with a GET's.
        let head = try parsed("HTTP/1.1 200 OK\r\nServer: nginx\r\nDate: d\r\nContent-Length: 9\r\n\r\n", method: .head)
        let otherDate = try parsed("HTTP/1.1 200 OK\r\nServer: nginx\r\nDate: e\r\nContent-Length: 2\r\n\r\n{}")
        // Fields made here, and fields with appended ones, are left as they are.
        let made = ProxyHeaders([.server: "nginx", .date: "d"]).sharedCopy(removing: [])
        var appended = two
        appended.append(HTTPField(name: .age, value: "1"))
        let answers = [pool.sharing(head), pool.sharing(otherDate), pool.sharing(made), pool.sharing(appended)]
        #expect(answers.allSatisfy { $0 == nil })
    }
}

/// What one entry object occupies, and that both of its kinds keep and give back every fact.
@Suite("cache: the entry object")
struct CacheEntryObjectTests {
    static func entry(staleIfError: Double = 0, staleWhileRevalidate: Double = 0, vary: [(name: String, value: String?)] = [],
                      part: CacheEntry.Part? = nil) -> CacheEntry {
        let body = ByteBuffer(string: part == nil ? "{\"id\":1}" : "id\"")
        let headers = ProxyHeaders([.eTag: "\"a\"", .contentType: "application/json"]).sharedCopy(removing: [])
        return CacheEntry.make(code: part == nil ? 200 : 206, headers: headers,
                               body: body, responseTime: Date(timeIntervalSince1970: 1_800_000_000.25), initialAge: 3.5, lifetime: 60,
                               noCache: false, mustRevalidate: true, fromWrite: true, staleIfError: staleIfError,
                               staleWhileRevalidate: staleWhileRevalidate, vary: vary, part: part, headerBytes: headers.textSize)
    }

    @Test("the usual entry takes 88 bytes (a 96-byte chunk of glibc's); one with a stale allowance, Vary keys or a part, 104")
    func sizes() {
        // glibc's malloc_usable_size (in malloc.h, which Glibc's module leaves out): what the chunk holds.
        typealias Usable = @convention(c) (UnsafeMutableRawPointer?) -> Int
        let symbol = dlsym(dlopen(nil, RTLD_NOW), "malloc_usable_size")
        guard let symbol else {
            Issue.record("no malloc_usable_size")
            return
        }
        func usable(_ entry: CacheEntry) -> Int { unsafeBitCast(symbol, to: Usable.self)(Unmanaged.passUnretained(entry).toOpaque()) }
        #expect(usable(Self.entry()) == 88)
        #expect([Self.entry(staleIfError: 5), Self.entry(staleWhileRevalidate: 1), Self.entry(vary: [("accept", nil)]),
                 Self.entry(part: CacheEntry.Part(first: 2, complete: 8))].allSatisfy { usable($0) == 104 })
    }

    @Test("both kinds keep every fact, and come back from their binary form byte for byte")
    func roundTrip() throws {
        let entries = [Self.entry(), Self.entry(staleIfError: 30, staleWhileRevalidate: 5), Self.entry(vary: [("accept", "a/b"), ("x-tenant", nil)]),
                       Self.entry(part: CacheEntry.Part(first: 2, complete: 8))]
        for entry in entries {
            let decoded = try #require(CacheEntry.decoded(entry.encoded()))
            #expect(decoded.encoded() == entry.encoded())
            #expect(decoded.size == entry.size && decoded.code == entry.code && decoded.part == entry.part && decoded.sameVariant(as: entry))
            #expect(decoded.staleIfError == entry.staleIfError && decoded.staleWhileRevalidate == entry.staleWhileRevalidate)
            #expect(decoded.mustRevalidate && decoded.fromWrite && !decoded.noCache && decoded.responseTime == entry.responseTime)
        }
        #expect(entries[0].staleIfError == 0 && entries[1].staleIfError == 30 && entries[1].staleWhileRevalidate == 5)
        #expect(entries[2].vary.map(\.name) == ["accept", "x-tenant"] && entries[2].matches([.accept: "a/b"]) && !entries[2].matches([:]))
        #expect(entries[0].matches([.accept: "x"]) && entries[3].part == CacheEntry.Part(first: 2, complete: 8) && entries[0].part == nil)
    }
}
