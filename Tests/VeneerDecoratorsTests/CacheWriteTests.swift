import Foundation
import HTTPTypes
import NIOCore
import Synchronization
import Testing
import VeneerCore
import VeneerDecorators
import VeneerTestSupport

/// Writes through the cache: what they invalidate (RFC 9111 §4.4), what they store and on
/// what evidence, and reads the cache must not answer: keys, bodies, collapsed misses.
@Suite("cache: invalidation, write-through on evidence, keys, bodies, collapsed misses")
struct CacheWriteTests {
    /// Which version of the items the upstream serves.
    final class Version: Sendable {
        private let number = Mutex(1)
        var value: Int { number.withLock { $0 } }
        func set(_ value: Int) { number.withLock { $0 = value } }
    }

    /// An upstream whose GET answers say which version of the item they are; `write` answers the rest.
    static func versioned(_ version: Version, write: @escaping @Sendable (RecordedRequest) -> UpstreamReply) -> @Sendable (RecordedRequest) async throws -> UpstreamReply {
        { request in
            guard request.method == "GET" else { return write(request) }
            let id = Int(request.target.split(separator: "/").last?.split(separator: "?").first ?? "") ?? 0
            return post(id, title: "v\(version.value)", headers: [("Cache-Control", "max-age=600"), ("ETag", "\"g\(version.value)\"")])
        }
    }

    // MARK: RFC 9111 §4.4: invalidation

    @Test("RFC 9111 §4.4: the upstream's own error answer to a write invalidates nothing", arguments: [409, 422, 500, 503])
    func errorKeeps(_ status: Int) async throws {
        let version = Version()
        try await withCache(reply: Self.versioned(version) { _ in UpstreamReply.json(#"{"error":"conflict"}"#, status: status) }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1")
            _ = try await rig.get("/posts")
            #expect(try await rig.send(.put, "/posts/1", #"{"title":"x","body":"b"}"#).status.code == status)
            #expect(try await rig.get("/posts/1").cacheStatus.hasPrefix("veneer; hit"))
            #expect(try await rig.get("/posts").cacheStatus.hasPrefix("veneer; hit"))
        }
    }

    @Test("RFC 9111 §4.4: Veneer's own failure after the request may have reached the upstream invalidates")
    func failureInvalidates() async throws {
        try await withScriptedCache(script: { received in
            received.text.hasPrefix("GET") ? .reply(ScriptedUpstream.ok(#"{"id":1,"title":"t","body":"b"}"#, extra: "Cache-Control: max-age=600\r\n")) : .close
        }) { (rig: ScriptedCacheRig) async throws in
            _ = try await rig.get("/posts/1")
            #expect(try await rig.get("/posts/1").cacheStatus.hasPrefix("veneer; hit"))
            await #expect(throws: ProxyError.self) { _ = try await rig.send(.put, "/posts/1", #"{"title":"x","body":"b"}"#) }
            #expect(try await rig.get("/posts/1").cacheStatus.contains("fwd=uri-miss"))
        }
    }

    @Test("RFC 9111 §4.4: the Location and Content-Location of a write's answer, paths of the same API, are invalidated too", arguments: [
        ("Location", "/posts/2"), ("Content-Location", "/v1/posts/2"), ("Location", "https://api.example.com/v1/posts/2?x=1"), ("Content-Location", "/posts"),
    ])
    func locationsInvalidated(_ name: String, _ value: String) async throws {
        let version = Version()
        try await withCache(reply: Self.versioned(version) { _ in UpstreamReply(status: 204, headers: [(name, value)], body: "") }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/2")
            _ = try await rig.get("/posts/3")
            _ = try await rig.send(.delete, "/posts/1")
            let named = value.hasSuffix("/posts") ? "/posts/3" : "/posts/2"
            let other = named == "/posts/2" ? "/posts/3" : "/posts/2"
            if value.hasSuffix("/posts") {
                #expect(try await rig.get(named).cacheStatus.hasPrefix("veneer; hit"), "the list's prefix holds lists only")
            } else {
                #expect(try await rig.get(named).cacheStatus.contains("fwd=uri-miss"))
                #expect(try await rig.get(other).cacheStatus.hasPrefix("veneer; hit"))
            }
        }
    }

    // MARK: Write-through, on evidence (issue 17; RFC 9110 §9.3.3, §9.3.4)

    @Test("a created item is stored only from a 201 whose Location or Content-Location names it and whose body's id is the same", arguments: [
        (201, "Location", "/posts/42", 42, true), (201, "Content-Location", "https://api.example.com/posts/42", 42, true),
        (201, "X-None", "", 42, false), (201, "Location", "/posts/42", 43, false), (200, "Location", "/posts/42", 42, false),
        (201, "Location", "/comments/42", 42, false), (201, "Location", "/posts/42?draft=1", 42, false),
    ])
    func createEvidence(_ status: Int, _ header: String, _ location: String, _ bodyID: Int, _ stored: Bool) async throws {
        let version = Version()
        try await withCache(reply: Self.versioned(version) { _ in
            UpstreamReply.json(#"{"id":\#(bodyID),"title":"new","body":"b"}"#, status: status, headers: header == "X-None" ? [] : [(header, location)])
        }) { (rig: CacheRig) async throws in
            let created = try await rig.send(.post, "/posts", #"{"title":"new","body":"b"}"#)
            #expect(created.cacheStatus == (stored ? "veneer; fwd=request; stored" : "veneer; fwd=request"))
            let fetched = try await rig.get("/posts/42")
            #expect(fetched.cacheStatus.hasPrefix("veneer; hit") == stored)
            #expect(fetched.text.contains("\"new\"") == stored)
        }
    }

    @Test("a create never replaces an entry already stored for the id it names: that entry is only invalidated")
    func createKeepsOut() async throws {
        let version = Version()
        try await withCache(reply: Self.versioned(version) { _ in
            UpstreamReply.json(#"{"id":42,"title":"forged","body":"b"}"#, status: 201, headers: [("Location", "/posts/42")])
        }) { (rig: CacheRig) async throws in
            #expect(try await rig.get("/posts/42").text.contains("v1"))
            let created = try await rig.send(.post, "/posts", #"{"title":"x","body":"b"}"#)
            #expect(created.cacheStatus == "veneer; fwd=request")
            version.set(2)
            let fetched = try await rig.get("/posts/42")
            #expect(fetched.text.contains("v2") && fetched.cacheStatus.contains("fwd=uri-miss"))
        }
    }

    @Test("a POST with a query string stores the created item under the item's path")
    func createWithQuery() async throws {
        let version = Version()
        try await withCache(reply: Self.versioned(version) { _ in
            UpstreamReply.json(#"{"id":7,"title":"new","body":"b"}"#, status: 201, headers: [("Location", "/posts/7")])
        }) { (rig: CacheRig) async throws in
            _ = try await rig.send(.post, "/posts?notify=1", #"{"title":"new","body":"b"}"#)
            #expect(try await rig.get("/posts/7").cacheStatus.hasPrefix("veneer; hit"))
            #expect(rig.upstream.requests.map(\.method) == ["POST"])
        }
    }

    @Test("a PUT or PATCH answer is stored only with Content-Location naming the item or a JSON object with its id", arguments: [
        (HTTPRequest.Method.put, #"{"id":1,"title":"w","body":"b"}"#, "", true), (.patch, #"{"id":"1","title":"w","body":"b"}"#, "", true),
        (.put, #"{"title":"w","body":"b"}"#, "/posts/1", true), (.put, #"{"status":"ok"}"#, "", false),
        (.put, #"{"id":2,"title":"w","body":"b"}"#, "", false), (.put, #"[{"id":1}]"#, "", false), (.put, #"{"status":"ok"}"#, "/posts/2", false),
    ])
    func updateEvidence(_ method: HTTPRequest.Method, _ body: String, _ contentLocation: String, _ stored: Bool) async throws {
        let version = Version()
        try await withCache(reply: Self.versioned(version) { _ in
            UpstreamReply.json(body, headers: contentLocation.isEmpty ? [] : [("Content-Location", contentLocation)])
        }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1")
            version.set(2)
            let written = try await rig.send(method, "/posts/1", #"{"title":"w","body":"b"}"#)
            #expect(written.cacheStatus == (stored ? "veneer; fwd=request; stored" : "veneer; fwd=request"))
            let fetched = try await rig.get("/posts/1")
            #expect(fetched.cacheStatus.hasPrefix("veneer; hit") == stored)
            #expect(fetched.text == (stored ? body : #"{"id":1,"title":"v2","body":"b"}"#))
        }
    }

    @Test("RFC 9110 §9.3.4: a conditional GET after a PUT revalidates with the upstream instead of trusting the PUT's validator")
    func conditionalAfterPut() async throws {
        try await withCache(reply: { request in
            switch request.method {
            case "PUT": return .json(#"{"id":1,"title":"w","body":"b"}"#, headers: [("ETag", "\"put\"")])
            default:
                return request.header("if-none-match") == "\"get\""
                    ? UpstreamReply(status: 304, headers: [("ETag", "\"get\"")], body: "")
                    : post(1, title: "w", headers: [("ETag", "\"get\""), ("Cache-Control", "max-age=600")])
            }
        }) { (rig: CacheRig) async throws in
            _ = try await rig.send(.put, "/posts/1", #"{"title":"w","body":"b"}"#)
            let conditional = try await rig.get("/posts/1", headers: [.ifNoneMatch: "\"put\""])
            #expect(conditional.status == .ok && conditional.headers[.eTag] == "\"get\"")
            #expect(rig.upstream.requests.map(\.method) == ["PUT", "GET"])
            #expect(try await rig.get("/posts/1").cacheStatus.hasPrefix("veneer; hit"), "what the GET returned is stored")
            #expect(try await rig.get("/posts/1", headers: [.ifNoneMatch: "\"get\""]).status == .notModified)
            #expect(rig.upstream.count == 2)
        }
    }

    // MARK: Reads the cache must not answer, or not share

    @Test("repeated query parameters keep their order in the key; different names are still sorted")
    func repeatedParameters() async throws {
        try await withCache(reply: { request in .json(#"{"target":"\#(request.target)"}"#, headers: [("Cache-Control", "max-age=600")]) }) { (rig: CacheRig) async throws in
            #expect(try await rig.get("/posts?userId=2&userId=1").text.contains("userId=2&userId=1"))
            #expect(try await rig.get("/posts?userId=1&userId=2").text.contains("userId=1&userId=2"))
            #expect(rig.upstream.count == 2)
            _ = try await rig.get("/posts?b=1&a=2&a=1")
            #expect(try await rig.get("/posts?a=2&b=1&a=1").cacheStatus.hasPrefix("veneer; hit"))
            #expect(try await rig.get("/posts?a=1&a=2&b=1").cacheStatus.contains("fwd=uri-miss"))
        }
    }

    @Test("a GET or HEAD with a body bypasses the cache: forwarded, not stored, not answered from the cache", arguments: [HTTPRequest.Method.get, .head])
    func readWithBody(_ method: HTTPRequest.Method) async throws {
        try await withCache(reply: { request in
            post(1, title: request.body.isEmpty ? "plain" : "with-body", headers: [("Cache-Control", "max-age=600")])
        }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1")
            let bypassed = try await rig.send(method, "/posts/1", #"{"q":1}"#)
            #expect(bypassed.cacheStatus.contains("fwd=bypass"))
            #expect(rig.upstream.count == 2 && rig.upstream.requests.last?.method == method.rawValue)
            #expect(rig.upstream.requests.last?.text == #"{"q":1}"#)
            let plain = try await rig.get("/posts/1")
            #expect(plain.text.contains("plain") && plain.cacheStatus.hasPrefix("veneer; hit"))
        }
    }

    @Test("RFC 9111 §4.1: collapsed misses share an answer only with callers whose selecting headers match it")
    func collapsedVary() async throws {
        try await withCache(reply: { request in
            var reply = post(1, title: request.header("x-tenant") ?? "none", headers: [("Vary", "X-Tenant"), ("Cache-Control", "max-age=600")])
            reply.delay = .milliseconds(300)
            return reply
        }) { (rig: CacheRig) async throws in
            let tenant = HTTPField.Name("X-Tenant")!
            let answers = try await withThrowingTaskGroup(of: (String, String).self) { group in
                for name in ["alpha", "beta", "alpha", "beta"] {
                    group.addTask { (name, try await rig.get("/posts/1", headers: [tenant: name]).text) }
                }
                return try await group.reduce(into: [(String, String)]()) { $0.append($1) }
            }
            #expect(answers.count == 4)
            for (name, text) in answers { #expect(text.contains("\"\(name)\""), "\(name) got \(text)") }
            #expect(rig.upstream.count == 2, "one fetch per tenant")
        }
    }
}
