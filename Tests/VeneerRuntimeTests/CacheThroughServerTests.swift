import Foundation
import HTTPTypes
import NIOCore
import Testing
@testable import VeneerRuntime
@testable import VeneerServer
import VeneerCore
import VeneerTestSupport

@Suite("cache through the server")
struct CacheThroughServerTests {
    @Test("the seed behaviour: a post created through Veneer is served from the cache next")
    func seedBehaviour() async throws {
        let yaml = "environments: {development: {origin: {mock: {}}, chain: [latency_log, {cache: {ttl: 30s}}]}}"
        try await withVeneer(yaml: yaml) { (veneer: RunningVeneer) async throws in
            let created = try await veneer.request("POST", "/posts", body: #"{"title":"hello","body":"world"}"#)
            #expect(created.status == 201 && created.header("Cache-Status") == "veneer; fwd=request; stored")
            let fetched = try await veneer.request("GET", "/posts/1")
            #expect(fetched.header("Cache-Status")?.hasPrefix("veneer; hit") == true)
            #expect(fetched.json?["title"] as? String == "hello")
        }
    }

    @Test("the edge answers a fresh hit without waiting, stamped with the request id, through latency_log; a miss waits; each shows its record")
    func answeredAtOnce() async throws {
        let yaml = "environments: {development: {origin: {mock: {}}, chain: [latency_log, {cache: {ttl: 30s}}]}}"
        try await withVeneer(yaml: yaml) { (veneer: RunningVeneer) async throws in
            let admin = AdminAPI(chain: veneer.chain, health: veneer.instance.health, metrics: veneer.instance.metrics,
                                 reloadStatus: ReloadStatus())
            let edge = ProxyEdge(chain: veneer.chain, admin: admin, logger: quietLogger(), adminOnly: false, servesAdmin: true)
            let fields: HTTPFields = [.xRequestID: "req-7"]
            let missRecord = RequestRecord(), hitRecord = RequestRecord()
            guard let pending = edge.begin(method: .get, target: "/posts", fields: fields, body: .complete(ByteBuffer()),
                                           client: ClientAddress("127.0.0.1"), record: missRecord).waiting() else {
                Issue.record("a miss was answered at once")
                return
            }
            #expect(veneer.chain.generation.requestsInFlight == 1)
            let missed = await edge.complete(pending)
            #expect(missed.headers[.cacheStatus]?.contains("fwd=uri-miss") == true && missed.headers[.xRequestID] == "req-7")
            #expect(veneer.chain.generation.requestsInFlight == 0)

            guard let hit = edge.begin(method: .get, target: "/posts", fields: fields, body: .complete(ByteBuffer()),
                                       client: ClientAddress("127.0.0.1"), record: hitRecord).answered else {
                Issue.record("a fresh hit waited for a task")
                return
            }
            #expect(hit.status == .ok && String(buffer: hit.body) == String(buffer: missed.body))
            #expect(hit.headers[.cacheStatus]?.hasPrefix("veneer; hit") == true)
            #expect(hit.headers[values: .xRequestID] == ["req-7"])
            #expect(veneer.chain.generation.requestsInFlight == 0, "an answer at once leaves its generation")
            let metrics = try await veneer.request("GET", "/-/metrics").text
            #expect(metrics.contains(#"veneer_request_duration_seconds_count{label="0",method="GET",route="/posts",status="200"} 2"#))
            let records = [missRecord.entries, hitRecord.entries]
            #expect(records.map { $0.map(\.name) } == [["cache", "mock"], ["cache"]], "the mock origin is asked on the miss only")
            #expect(records.first?.first?.detail == "miss stored" && records.last?.first?.detail == "hit")
        }
    }

    @Test("a thousand hits pipelined behind a slow miss are all answered, in order, on the one connection")
    func pipelinedHitsBehindAMiss() async throws {
        try await withTestUpstream({ request in
            guard request.target.hasSuffix("/2") else { return post(1) }
            var slow = post(2)
            slow.delay = .milliseconds(300)
            return slow
        }) { (upstream: TestUpstream) async throws in
            let yaml = "environments: {development: {origin: {upstream: {url: \"\(upstream.url)\"}}, chain: [{cache: {ttl: 1h}}]}}"
            try await withVeneer(yaml: yaml) { (veneer: RunningVeneer) async throws in
                _ = try await veneer.request("GET", "/posts/1")
                let connection = try await RawConnection.connect(port: veneer.port)
                defer { connection.close() }
                // While /posts/2 waits for the upstream, the hits queue up behind it (none may
                // overtake it); when it comes, they are answered one after the other.
                let hits = 1000
                let host = "Host: 127.0.0.1:\(veneer.port)\r\n"
                try await connection.send("GET /posts/2 HTTP/1.1\r\n\(host)\r\n"
                    + String(repeating: "GET /posts/1 HTTP/1.1\r\n\(host)\r\n", count: hits - 1)
                    + "GET /posts/1 HTTP/1.1\r\n\(host)X-Request-Id: the-last-one\r\n\r\n")
                _ = try await connection.wait(timeout: .seconds(60)) { bytes, closed in
                    closed || String(decoding: bytes.suffix(400), as: UTF8.self).contains("the-last-one")
                }
                let responses = RawConnection.parse(connection.received)
                #expect(responses.count == hits + 1)
                #expect(responses.allSatisfy { $0.status == 200 })
                #expect(responses.first?.json?["id"] as? Int == 2)
                #expect(responses.dropFirst().allSatisfy { $0.header("Cache-Status")?.hasPrefix("veneer; hit") == true })
                #expect(!connection.isClosed)
                #expect(upstream.count == 2)
            }
        }
    }

    @Test("an upstream that breaks off its body leaves nothing in the cache")
    func partialBody() async throws {
        let upstream = try await ScriptedUpstream.start { _ in
            .replyAndClose("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nCache-Control: max-age=60\r\nContent-Length: 100\r\n\r\n{\"id\":1,\"ti")
        }
        defer { Task { await upstream.stop() } }
        let yaml = "environments: {development: {origin: {upstream: {url: \"http://127.0.0.1:\(upstream.port)\"}}, chain: [{cache: {ttl: 1h}}]}}"
        try await withVeneer(yaml: yaml) { (veneer: RunningVeneer) async throws in
            let first = try await veneer.request("GET", "/posts/1")
            #expect(first.status == 502 && first.errorCode == "upstream_unavailable")
            let second = try await veneer.request("GET", "/posts/1")
            #expect(second.status == 502)
            #expect(upstream.connections == 2, "nothing was stored, so the second request went upstream again")
        }
    }

    @Test("RFC 9111 §4.1: two callers miss at the same moment on an upstream that varies on X-Tenant slowly; each gets its own tenant's data")
    func collapsedMissesVary() async throws {
        try await withTestUpstream({ request in
            var reply = UpstreamReply.json(#"{"id":1,"title":"\#(request.header("x-tenant") ?? "none")","body":"b"}"#,
                                           headers: [("Vary", "X-Tenant"), ("Cache-Control", "max-age=600")])
            reply.delay = .milliseconds(300)
            return reply
        }) { (upstream: TestUpstream) async throws in
            let yaml = "environments: {development: {origin: {upstream: {url: \"\(upstream.url)\"}}, chain: [{cache: {ttl: 1h}}]}}"
            try await withVeneer(yaml: yaml) { (veneer: RunningVeneer) async throws in
                async let alpha = veneer.request("GET", "/posts/1", headers: [("X-Tenant", "alpha")])
                async let beta = veneer.request("GET", "/posts/1", headers: [("X-Tenant", "beta")])
                let (first, second) = try await (alpha, beta)
                #expect(first.json?["title"] as? String == "alpha")
                #expect(second.json?["title"] as? String == "beta", "\(second.header("Cache-Status") ?? "")")
                #expect(upstream.count == 2)
            }
        }
    }

    @Test("a reload with the same cache options keeps the cache warm")
    func warmAcrossReload() async throws {
        try await withTestUpstream({ _ in post(1) }) { (upstream: TestUpstream) async throws in
            let box = YAMLBox("environments: {development: {origin: {upstream: {url: \"\(upstream.url)\"}}, chain: [{cache: {ttl: 1h}}]}}")
            try await withVeneer(yaml: "", yamlProvider: { box.value }) { (veneer: RunningVeneer) async throws in
                _ = try await veneer.request("GET", "/posts/1")
                box.set("environments: {development: {origin: {upstream: {url: \"\(upstream.url)\"}}, chain: [latency_log, {cache: {ttl: 1h}}]}}")
                _ = try await veneer.instance.reload().get()
                #expect(try await veneer.request("GET", "/posts/1").header("Cache-Status")?.hasPrefix("veneer; hit") == true)
                #expect(upstream.count == 1)
            }
        }
    }

    @Test("cache counters appear in /-/metrics")
    func metrics() async throws {
        try await withVeneer(yaml: "environments: {development: {origin: {mock: {}}, chain: [{cache: {}}]}}") { (veneer: RunningVeneer) async throws in
            _ = try await veneer.request("GET", "/posts")
            _ = try await veneer.request("GET", "/posts")
            let text = try await veneer.request("GET", "/-/metrics").text
            #expect(text.contains(#"veneer_cache_requests_total{cache="memory",result="hit"} 1"#))
            #expect(text.contains(#"veneer_cache_requests_total{cache="memory",result="miss"} 1"#))
        }
    }
}

func post(_ id: Int) -> UpstreamReply {
    .json(#"{"id":\#(id),"title":"t","body":"b"}"#, headers: [("Cache-Control", "max-age=3600")])
}
