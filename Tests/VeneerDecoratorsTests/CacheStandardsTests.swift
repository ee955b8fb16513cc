import Foundation
import HTTPTypes
import NIOCore
import Synchronization
import Testing
import VeneerCore
import VeneerDecorators
import VeneerTestSupport

/// The finer points of RFC 9111 (and RFC 9110, RFC 9213) that a conformance suite checks,
/// each against a real upstream.
@Suite("cache: ages, dates, targeted fields, Vary, stale answers, validators (RFC 9111, 9110, 9213)")
struct CacheStandardsTests {
    static let veneerCacheControl = HTTPField.Name("Veneer-Cache-Control")!
    static let cdnCacheControl = HTTPField.Name("CDN-Cache-Control")!

    // MARK: RFC 9111 §5.1, §4.2.3: Age

    @Test("RFC 9111 §5.1: an Age that is not a non-negative integer is ignored", arguments: ["7200.0", "60s", "-7200", "0x10", "7200 s"])
    func invalidAge(_ value: String) async throws {
        try await withCache(reply: { _ in post(1, headers: [("Cache-Control", "max-age=3600"), ("Age", value)]) }) { (rig: CacheRig) async throws in
            let first = try await rig.get("/posts/1")
            #expect(first.headers[.age] == "0")
            #expect(try await rig.get("/posts/1").cacheStatus.hasPrefix("veneer; hit"), "fresh: the Age counts as absent")
            #expect(rig.upstream.count == 1)
        }
    }

    @Test("RFC 9111 §5.1: of several Age values (field lines or a list), the first counts", arguments: [
        [("Age", "7200"), ("Age", "0")], [("Age", "7200, 0")],
    ])
    func firstAge(_ ages: [(String, String)]) async throws {
        try await withCache(reply: { _ in post(1, headers: [("Cache-Control", "max-age=3600")] + ages) }) { (rig: CacheRig) async throws in
            #expect(try await rig.get("/posts/1").headers[.age] == "7200")
            _ = try await rig.get("/posts/1")
            #expect(rig.upstream.count == 2, "already stale when it arrived")
        }
    }

    @Test("RFC 9111 §4.2.3: the Age sent is the upstream's Age plus the time resident, on the miss and on every hit")
    func ageSent() async throws {
        try await withCache(reply: { _ in post(1, headers: [("Cache-Control", "max-age=100"), ("Age", "30")]) }) { (rig: CacheRig) async throws in
            #expect(try await rig.get("/posts/1").headers[values: .age] == ["30"])
            rig.clock.advance(by: .seconds(5))
            #expect(try await rig.get("/posts/1").headers[values: .age] == ["35"])
        }
    }

    // MARK: RFC 9110 §5.6.7, RFC 9111 §5.3: dates

    @Test("RFC 9111 §5.3: an Expires that is not exactly an HTTP-date means already expired", arguments: [
        "Sun, 06-Nov-2094 08:49:37 GMT", "Sun,  06 Nov 2094 08:49:37 GMT", "Sun, 06 Nov 2094 8:49:37 GMT", "0", "Sun, 06 Nov 2094 08:49:37 UTC",
    ])
    func invalidExpires(_ expires: String) async throws {
        try await withCache(reply: { _ in post(1, headers: [("Expires", expires)]) }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1")
            _ = try await rig.get("/posts/1")
            #expect(rig.upstream.count == 2)
        }
    }

    @Test("RFC 9110 §5.6.7, RFC 9111 §4.2: the obsolete date formats and any letter case are read")
    func obsoleteExpires() async throws {
        let now = Date()
        let later = now.addingTimeInterval(3600)
        try await withCache(start: now, reply: { request in
            let formats = ["/posts/1": HTTPDate.format(later).uppercased(), "/posts/2": Self.asctime(later)]
            return post(1, headers: [("Date", HTTPDate.format(now)), ("Expires", formats[request.target] ?? "")])
        }) { (rig: CacheRig) async throws in
            for path in ["/posts/1", "/posts/2"] {
                _ = try await rig.get(path)
                rig.clock.advance(by: .seconds(1))
                #expect(try await rig.get(path).cacheStatus.hasPrefix("veneer; hit"), "\(path)")
            }
        }
    }

    static func asctime(_ date: Date) -> String {
        // IMF-fixdate `Sun, 06 Nov 1994 08:49:37 GMT` rearranged as `Sun Nov  6 08:49:37 1994`.
        let parts = HTTPDate.format(date).split(separator: " ")
        let day = Int(parts[1])!
        return "\(parts[0].dropLast()) \(parts[2]) \(day < 10 ? " " : "")\(day) \(parts[4]) \(parts[3])"
    }

    // MARK: RFC 9111 §4.2.2: heuristic freshness and public

    @Test("RFC 9111 §3, §4.2.2: public makes a status that is not heuristically cacheable storable, fresh for ttl")
    func publicStatus() async throws {
        try await withCache(reply: { _ in UpstreamReply(status: 302, headers: [("Location", "/posts/2"), ("Cache-Control", "public")], body: "") }) { (rig: CacheRig) async throws in
            #expect(try await rig.get("/posts/1").cacheStatus.hasSuffix("stored"))
            #expect(try await rig.get("/posts/1").cacheStatus.hasPrefix("veneer; hit"))
            #expect(rig.upstream.count == 1)
        }
    }

    // MARK: RFC 9213: targeted fields

    @Test("RFC 9213 §2.2: a valid Veneer-Cache-Control replaces Cache-Control and Expires, and is never passed on")
    func targetedReplaces() async throws {
        let expires = HTTPDate.format(Date().addingTimeInterval(3600))
        try await withCache(reply: { request in
            switch request.target {
            case "/posts/1": return post(1, headers: [("Cache-Control", "no-store"), ("Veneer-Cache-Control", "max-age=60")])
            default: return post(2, headers: [("Expires", expires), ("Veneer-Cache-Control", "max-age=10")])
            }
        }) { (rig: CacheRig) async throws in
            let miss = try await rig.get("/posts/1")
            #expect(miss.cacheStatus.hasSuffix("stored") && !miss.headers.contains(Self.veneerCacheControl))
            let hit = try await rig.get("/posts/1")
            #expect(hit.cacheStatus.hasPrefix("veneer; hit") && !hit.headers.contains(Self.veneerCacheControl))
            #expect(hit.headers[.cacheControl] == "no-store", "Cache-Control itself goes on to the caller unchanged")
            _ = try await rig.get("/posts/2")
            rig.clock.advance(by: .seconds(20))
            _ = try await rig.get("/posts/2")
            #expect(rig.upstream.count == 3, "Expires does not count beside a valid targeted field")
        }
    }

    @Test("RFC 9213 §2.1: a targeted field that is empty or does not parse is ignored; members of the wrong type and parameters are", arguments: [
        ("max-age=5", 5), ("max-age=5, =x", 600), ("", 600), ("max-age=5.0", 60), ("max-age=\"5\"", 60), ("max-age=5;a=1", 5),
        ("no-store=?0, max-age=5", 5), ("MAX-AGE=5", 600),
    ])
    func targetedSyntax(_ value: String, _ freshFor: Int) async throws {
        // Cache-Control says 600 s; a valid targeted field without a usable max-age leaves ttl (60 s).
        try await withCache(reply: { _ in post(1, headers: [("Cache-Control", "max-age=600"), ("Veneer-Cache-Control", value)]) }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1")
            try await rig.expectFresh("/posts/1", for: freshFor)
        }
    }

    @Test("RFC 9213 §3: CDN-Cache-Control is not Veneer's unless listed, and is passed on")
    func cdnNotListed() async throws {
        try await withCache(reply: { _ in post(1, headers: [("Cache-Control", "max-age=60"), ("CDN-Cache-Control", "no-store")]) }) { (rig: CacheRig) async throws in
            let first = try await rig.get("/posts/1")
            #expect(first.cacheStatus.hasSuffix("stored") && first.headers[Self.cdnCacheControl] == "no-store")
        }
    }

    // MARK: RFC 9111 §4.1: Vary

    @Test("RFC 9111 §4.1: selecting values are compared normalised: field lines combined, whitespace around commas removed", arguments: [
        [("Accept-Encoding", "gzip,deflate")], [("Accept-Encoding", "gzip ,  deflate")], [("Accept-Encoding", "gzip"), ("Accept-Encoding", "deflate")],
    ])
    func varyNormalised(_ second: [(String, String)]) async throws {
        try await withCache(reply: { _ in post(1, headers: [("Vary", "accept-encoding"), ("Cache-Control", "max-age=60")]) }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1", headers: [.acceptEncoding: "gzip, deflate"])
            var fields = HTTPFields()
            for (name, value) in second { fields.append(HTTPField(name: HTTPField.Name(name)!, value: value)) }
            #expect(try await rig.get("/posts/1", headers: fields).cacheStatus.hasPrefix("veneer; hit"))
            #expect(try await rig.get("/posts/1", headers: [.acceptEncoding: "deflate, gzip"]).cacheStatus.contains("vary-miss"))
        }
    }

    // MARK: RFC 9111 §4.2.4: stale answers

    @Test("RFC 9111 §4.2.4: stale_if_error never serves a response that must be revalidated first", arguments: [
        "no-cache", "must-revalidate", "proxy-revalidate", "s-maxage=10",
    ])
    func staleIfErrorRefuses(_ directive: String) async throws {
        var options = CacheOptions()
        options.staleIfError = .seconds(3600)
        let failing = Mutex(false)
        try await withCache(options, reply: { _ in
            failing.withLock { $0 } ? UpstreamReply(status: 503, body: "{}") : post(1, headers: [("Cache-Control", "max-age=10, \(directive)"), ("ETag", "\"e\"")])
        }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1")
            failing.withLock { $0 = true }
            rig.clock.advance(by: .seconds(60))
            #expect(try await rig.get("/posts/1").status == .serviceUnavailable)
        }
    }

    @Test("RFC 9111 §4.2.4: an upstream that closes the connection before answering is an error for stale_if_error, never for no-cache")
    func staleWhenClosed() async throws {
        var options = CacheOptions()
        options.staleIfError = .seconds(3600)
        try await withScriptedCache(options, script: { received in
            received.connection == 0
                ? .replyAndClose(ScriptedUpstream.ok(#"{"id":1,"title":"t","body":"b"}"#, extra: "Cache-Control: max-age=10\r\nETag: \"e\"\r\n"))
                : .close
        }) { (rig: ScriptedCacheRig) async throws in
            _ = try await rig.get("/posts/1")
            rig.clock.advance(by: .seconds(60))
            let stale = try await rig.get("/posts/1")
            #expect(stale.status == .ok && stale.cacheStatus.contains("fwd-status=502") && stale.cacheStatus.contains("detail=stale-if-error"))
        }
        try await withScriptedCache(options, script: { received in
            received.connection == 0
                ? .replyAndClose(ScriptedUpstream.ok(#"{"id":2,"title":"t","body":"b"}"#, extra: "Cache-Control: no-cache\r\nETag: \"e\"\r\n"))
                : .close
        }) { (rig: ScriptedCacheRig) async throws in
            _ = try await rig.get("/posts/2")
            await #expect(throws: ProxyError.self) { _ = try await rig.get("/posts/2") }
        }
    }

    // MARK: RFC 9111 §5.2.2.3: must-understand

    @Test("RFC 9111 §5.2.2.3: must-understand stores despite no-store when the status is understood, never otherwise", arguments: [
        (200, true), (404, true), (299, false), (599, false),
    ])
    func mustUnderstand(_ status: Int, _ stored: Bool) async throws {
        try await withCache(reply: { _ in UpstreamReply(status: status, headers: [("Cache-Control", "must-understand, no-store, max-age=60")], body: "{}") }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1")
            _ = try await rig.get("/posts/1")
            #expect(rig.upstream.count == (stored ? 1 : 2))
        }
    }

    // MARK: RFC 9110 §13.1.3, RFC 9111 §4.3.2: If-Modified-Since

    @Test("RFC 9110 §13.1.3, RFC 9111 §4.3.2: If-Modified-Since is compared with Date when there is no Last-Modified")
    func ifModifiedSinceDate() async throws {
        let date = Date().addingTimeInterval(-60)
        try await withCache(reply: { _ in post(1, headers: [("Date", HTTPDate.format(date)), ("Cache-Control", "max-age=600")]) }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1")
            let same = try await rig.get("/posts/1", headers: [.ifModifiedSince: HTTPDate.format(date)])
            #expect(same.status == .notModified)
            let earlier = try await rig.get("/posts/1", headers: [.ifModifiedSince: HTTPDate.format(date.addingTimeInterval(-10))])
            #expect(earlier.status == .ok)
            var twice = HTTPFields()
            twice.append(HTTPField(name: .ifModifiedSince, value: HTTPDate.format(date)))
            twice.append(HTTPField(name: .ifModifiedSince, value: HTTPDate.format(date)))
            #expect(try await rig.get("/posts/1", headers: twice).status == .ok, "more than one member: ignored")
            #expect(rig.upstream.count == 1)
        }
    }
}
