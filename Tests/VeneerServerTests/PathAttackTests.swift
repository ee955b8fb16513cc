import Foundation
import Testing
import VeneerTestSupport

@Suite("Strict paths: only /posts and /posts/<positive integer> ever reach the upstream")
struct PathAttackTests {
    @Test("attack paths are refused before the upstream, or forwarded only as sent (never rewritten)", arguments: [
        ("/posts/..%2fx", 400, nil as String?),
        ("/posts/%2e%2e/x", 404, nil),
        ("//posts/1", 404, nil),
        ("/posts/1;x", 400, nil),
        ("/posts/1.css", 400, nil),
        ("/posts/1/", 404, nil),
        ("/posts/", 404, nil),
        ("/posts/../admin", 404, nil),
        ("/posts%2f1", 404, nil),
        ("/POSTS/1", 404, nil),
        ("/posts/1%00", 400, nil),
        ("/posts/ 1", 400, nil),
        ("/posts/007", 400, nil),
        ("/posts/0", 400, nil),
        ("/posts/00", 400, nil),
        ("/posts/01", 400, nil),
        ("/posts/10", 200, "/posts/10"),
        ("/posts?q=a%2Fb&sort=id", 200, "/posts?q=a%2Fb&sort=id"),
        ("/posts/1?x=<script>", 400, nil),
        ("http://evil.example/posts/1", 421, nil),
    ])
    func attacks(_ target: String, _ status: Int, _ forwarded: String?) async throws {
        try await withTestUpstream({ _ in .json(#"{"id":1,"title":"t","body":"b"}"#) }) { (upstream: TestUpstream) async throws in
            let yaml = "environments: {development: {origin: {upstream: {url: \"\(upstream.url)\"}}}}"
            try await withVeneer(yaml: yaml) { (veneer: RunningVeneer) async throws in
                let raw = "GET \(target) HTTP/1.1\r\nHost: \(veneer.host)\r\nConnection: close\r\n\r\n"
                let response = try await RawHTTP.send(port: veneer.port, Array(raw.utf8))
                #expect(response.status == status, "\(target) answered \(response.status)")
                #expect(upstream.requests.map(\.target) == (forwarded.map { [$0] } ?? []), "\(target)")
            }
        }
    }

    @Test("hop-by-hop request headers never reach the upstream, including those named in Connection")
    func hopByHop() async throws {
        try await withTestUpstream({ _ in .json("{}") }) { (upstream: TestUpstream) async throws in
            let yaml = "environments: {development: {origin: {upstream: {url: \"\(upstream.url)\"}}}}"
            try await withVeneer(yaml: yaml) { (veneer: RunningVeneer) async throws in
                let response = try await veneer.request("GET", "/posts/1", headers: [
                    ("Connection", "close, X-Hop"), ("X-Hop", "secret"), ("Keep-Alive", "timeout=5"), ("TE", "trailers"),
                    ("Proxy-Authorization", "Basic abc"), ("X-End-To-End", "kept"),
                ])
                #expect(response.status == 200)
                let received = try #require(upstream.requests.first)
                for name in ["x-hop", "keep-alive", "te", "proxy-authorization"] {
                    #expect(received.header(name) == nil, "\(name) was forwarded")
                }
                #expect(received.header("connection")?.lowercased().contains("x-hop") != true)
                #expect(received.header("x-end-to-end") == "kept")
                #expect(received.header("x-request-id") == response.header("X-Request-Id"))
                #expect(received.header("x-forwarded-for") == "127.0.0.1")
            }
        }
    }

    @Test("an unreachable upstream is 502 and a slow one 504, as JSON errors")
    func upstreamFailures() async throws {
        try await withRefusingPort { port in
            try await withVeneer(yaml: "environments: {development: {origin: {upstream: {url: \"http://127.0.0.1:\(port)\"}}}}") { (veneer: RunningVeneer) async throws in
                let response = try await veneer.request("GET", "/posts/1")
                #expect(response.status == 502 && response.errorCode == "upstream_unavailable")
            }
        }
        try await withTestUpstream({ _ in UpstreamReply(body: "{}", delay: .seconds(3)) }) { (upstream: TestUpstream) async throws in
            try await withVeneer(yaml: "environments: {development: {origin: {upstream: {url: \"\(upstream.url)\", timeout: 200ms}}}}") { (veneer: RunningVeneer) async throws in
                let response = try await veneer.request("GET", "/posts/1")
                #expect(response.status == 504 && response.errorCode == "upstream_timeout")
            }
        }
    }
}
