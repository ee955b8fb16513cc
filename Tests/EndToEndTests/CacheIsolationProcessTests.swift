import Foundation
import Testing
import VeneerTestSupport

/// The cache holes of the security review (issue 17), each tried against the real binary as a
/// caller would: one caller must never get an answer selected, keyed or written for another.
@Suite("cache isolation through the real binary: Vary on collapsed misses, query keys, write evidence, read bodies")
struct CacheIsolationProcessTests {
    /// Runs `body` with Veneer (a one-hour cache in front of `reply`) on a free port.
    func withCachingVeneer(_ reply: @escaping @Sendable (RecordedRequest) async throws -> UpstreamReply,
                           _ body: (TestUpstream, Int) async throws -> Void) async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await withTestUpstream(reply) { (upstream: TestUpstream) async throws in
            let yaml = """
                state_dir: \(directory)/state
                environments:
                  development:
                    origin: { upstream: { url: "\(upstream.url)" } }
                    chain:
                      - cache: { ttl: 1h }
                """
            try yaml.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
            let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
            defer { process.terminate() }
            try await body(upstream, try await process.waitUntilReady())
        }
    }

    @Test("two tenants missing on one URL at the same moment each get their own answer when the upstream varies on the tenant")
    func collapsedMissesHonourVary() async throws {
        try await withCachingVeneer({ request in
            var reply = UpstreamReply.json(#"{"id":1,"title":"\#(request.header("x-tenant") ?? "none")","body":"b"}"#,
                                           headers: [("Vary", "X-Tenant"), ("Cache-Control", "max-age=600")])
            reply.delay = .milliseconds(300)
            return reply
        }) { upstream, port in
            async let alpha = RawHTTP.request(port: port, "GET", "/posts/1", headers: [("X-Tenant", "alpha")])
            async let beta = RawHTTP.request(port: port, "GET", "/posts/1", headers: [("X-Tenant", "beta")])
            let (first, second) = try await (alpha, beta)
            #expect(first.json?["title"] as? String == "alpha", "\(first.header("Cache-Status") ?? "")")
            #expect(second.json?["title"] as? String == "beta", "\(second.header("Cache-Status") ?? "")")
            #expect(upstream.count == 2)
        }
    }

    @Test("repeated query parameters in another order are another key: the upstream may read them in order")
    func repeatedParametersKeepTheirOrder() async throws {
        try await withCachingVeneer({ request in
            .json(#"{"target":"\#(request.target)"}"#, headers: [("Cache-Control", "max-age=600")])
        }) { upstream, port in
            #expect(try await RawHTTP.request(port: port, "GET", "/posts?userId=2&userId=1").text.contains("userId=2&userId=1"))
            let reordered = try await RawHTTP.request(port: port, "GET", "/posts?userId=1&userId=2")
            #expect(reordered.text.contains("userId=1&userId=2"), "\(reordered.header("Cache-Status") ?? "")")
            #expect(upstream.count == 2)
        }
    }

    @Test("a write's answer that does not show it is the item is never served as the item")
    func writeThroughNeedsEvidence() async throws {
        try await withCachingVeneer({ request in
            switch request.method {
            case "PUT": return .json(#"{"status":"ok"}"#)
            case "POST": return .json(#"{"id":1,"title":"forged","body":"b"}"#, status: 201)
            default: return .json(#"{"id":1,"title":"stored","body":"b"}"#, headers: [("Cache-Control", "max-age=600")])
            }
        }) { upstream, port in
            _ = try await RawHTTP.request(port: port, "PUT", "/posts/1", body: #"{"title":"x","body":"b"}"#)
            let afterPut = try await RawHTTP.request(port: port, "GET", "/posts/1")
            #expect(afterPut.json?["title"] as? String == "stored", "\(afterPut.text)")
            // A 201 without a Location naming the item is no evidence: the stored item stays as the upstream served it.
            _ = try await RawHTTP.request(port: port, "POST", "/posts", body: #"{"title":"forged","body":"b"}"#)
            let afterPost = try await RawHTTP.request(port: port, "GET", "/posts/1")
            #expect(afterPost.json?["title"] as? String == "stored", "\(afterPost.text)")
            #expect(upstream.requests.map(\.method) == ["PUT", "GET", "POST"])
        }
    }

    @Test("a GET with a body is forwarded with it and neither answered from nor stored in the cache")
    func readWithBodyBypasses() async throws {
        try await withCachingVeneer({ request in
            .json(#"{"id":1,"title":"\#(request.body.isEmpty ? "plain" : "with-body")","body":"b"}"#, headers: [("Cache-Control", "max-age=600")])
        }) { upstream, port in
            let withBody = try await RawHTTP.request(port: port, "GET", "/posts/1", body: #"{"q":1}"#)
            #expect(withBody.json?["title"] as? String == "with-body" && withBody.header("Cache-Status")?.contains("fwd=bypass") == true)
            let plain = try await RawHTTP.request(port: port, "GET", "/posts/1")
            #expect(plain.json?["title"] as? String == "plain", "the answer to the request with a body was not stored")
            _ = try await RawHTTP.request(port: port, "GET", "/posts/1")
            let again = try await RawHTTP.request(port: port, "GET", "/posts/1", body: #"{"q":2}"#)
            #expect(again.json?["title"] as? String == "with-body", "a stored answer is not given to a request with a body")
            #expect(upstream.count == 3 && upstream.requests.first?.text == #"{"q":1}"#)
        }
    }
}
