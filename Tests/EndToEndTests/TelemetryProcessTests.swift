import Foundation
import Testing
import VeneerTestSupport

/// `telemetry:` in the real binary, against a real OTLP receiver that decodes what Veneer
/// sends with OpenTelemetry's own protobuf definitions (`Tests/otlp/otlp_receiver.py`).
@Suite("telemetry: traces exported over OTLP/HTTP, decoded by the official definitions")
struct TelemetryProcessTests {
    /// Starts a receiver, an upstream and Veneer with `chain` and `telemetry` (the receiver's
    /// endpoint filled in), and runs `body`.
    func withVeneer(telemetry: String = "", chain: String = "[latency_log, cache]", extra: String = "", hang: Bool = false,
                    upstream reply: @escaping @Sendable (RecordedRequest) async throws -> UpstreamReply = { _ in .json(#"{"id":1}"#, headers: [("Cache-Control", "max-age=60")]) },
                    _ body: (_ port: Int, _ receiver: OTLPReceiver, _ upstream: TestUpstream, _ directory: String) async throws -> Void) async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let receiver = try await OTLPReceiver.start(hang: hang)
        defer { receiver.stop() }
        try await withTestUpstream(reply) { (upstream: TestUpstream) async throws in
            try """
                state_dir: \(directory)/state
                environments:
                  development:
                    access_log: \(directory)/access.log
                    telemetry: { endpoint: "\(receiver.url)", service_name: veneer-test\(telemetry) }
                    origin: { upstream: { url: "\(upstream.url)" } }
                    chain: \(chain)
                \(extra)
                """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
            let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
            defer { process.terminate() }
            let port = try await process.waitUntilReady()
            // For a test that reads the process's memory.
            try String(process.process.pid).write(toFile: directory + "/veneer.pid", atomically: true, encoding: .utf8)
            try await body(port, receiver, upstream, directory)
        }
    }

    /// The spans of trace `traceID`, once its server span has arrived.
    func trace(_ traceID: String, in receiver: OTLPReceiver, count: Int) async throws -> [OTLPReceiver.Span] {
        try await eventually("\(count) spans of trace \(traceID) arrive") { receiver.spans.filter { $0.traceID == traceID }.count >= count }
        return receiver.spans.filter { $0.traceID == traceID }
    }

    @Test("one trace per request: a server span with the HTTP conventions' attributes, a child per decorator that acted, a client span per upstream attempt whose traceparent the upstream received")
    func structure() async throws {
        try await withVeneer { port, receiver, upstream, directory in
            let answer = try await RawHTTP.request(port: port, "GET", "/posts/1?x=1", headers: [("User-Agent", "telemetry-test")])
            #expect(answer.status == 200)
            let sent = try #require(upstream.requests.first?.header("traceparent"), "the upstream got Veneer's traceparent")
            let parts = sent.split(separator: "-").map(String.init)
            #expect(parts.count == 4 && parts[0] == "00" && parts[3] == "01")
            let spans = try await trace(parts[1], in: receiver, count: 4)
            let server = try #require(spans.first { $0.kind == 2 })
            #expect(server.name == "GET /posts/{id}")
            #expect(server.parentSpanID.isEmpty)
            #expect(server.attribute("http.request.method") as? String == "GET")
            #expect(server.attribute("http.route") as? String == "/posts/{id}")
            #expect(server.attribute("url.path") as? String == "/posts/1")
            #expect(server.attribute("http.response.status_code") as? Int == 200)
            #expect(server.attribute("client.address") as? String == "127.0.0.1")
            #expect(server.attribute("server.address") as? String == "127.0.0.1")
            #expect(server.attribute("server.port") as? Int == port)
            #expect(server.attribute("user_agent.original") as? String == "telemetry-test")
            #expect(server.attribute("veneer.cache_status") != nil)
            #expect((server.fields["resource"] as? [String: any Sendable])?["service.name"] as? String == "veneer-test")
            let client = try #require(spans.first { $0.kind == 3 })
            #expect(client.spanID == parts[2], "the upstream's traceparent names the client span")
            #expect(client.parentSpanID == server.spanID)
            #expect(client.attribute("http.response.status_code") as? Int == 200)
            let children = spans.filter { $0.kind == 1 }
            #expect(Set(children.map(\.name)) == ["latency_log", "cache"], "\(children.map(\.name))")
            #expect(children.allSatisfy { $0.parentSpanID == server.spanID })
            #expect(children.first { $0.name == "cache" }?.attribute("veneer.decision") as? String == "miss stored")
            // Its status is the server span's alone (README, Traces): not repeated on the cache span.
            #expect(children.first { $0.name == "cache" }?.attribute("veneer.cache_status") == nil)
            // The access log line joins the trace.
            try await eventually("the access log has the line") { ((try? String(contentsOfFile: directory + "/access.log", encoding: .utf8)) ?? "").contains(server.spanID) }
            let line = try String(contentsOfFile: directory + "/access.log", encoding: .utf8)
            #expect(line.contains("\"trace_id\":\"\(parts[1])\",\"span_id\":\"\(server.spanID)\""), "\(line)")

            // A hit: a trace of its own, no client span, no request to the upstream.
            let hit = try await RawHTTP.request(port: port, "GET", "/posts/1?x=1")
            #expect(hit.status == 200 && upstream.count == 1)
            try await eventually("the hit's trace arrives") { Set(receiver.spans.map(\.traceID)).count == 2 }
            let hitSpans = receiver.spans.filter { $0.traceID != parts[1] }
            #expect(hitSpans.filter { $0.kind == 3 }.isEmpty)
            let hitStatus = hitSpans.first { $0.kind == 2 }?.attribute("veneer.cache_status") as? String
            #expect(hitStatus?.hasPrefix("veneer; hit") == true, "\(hitStatus ?? "none")")
        }
    }

    @Test("a 401 retried by auth_refresh is a second client span; the refresh it started is a client span whose traceparent the token endpoint received")
    func retryAndTokenEndpoint() async throws {
        let tokens = try await TestTokenServer.start()
        defer { Task { await tokens.stop() } }
        let answered = Counter()
        let chain = "[{ auth_refresh: { token_url: \"\(tokens.url)\", client_id: veneer, client_secret: s3cret, refresh_token: rt-0 } }]"
        try await withVeneer(chain: chain, upstream: { request in
            // The first request is refused whatever its token: auth_refresh refreshes and retries it.
            answered.next() == 1 ? .json(#"{"error":"invalid_token"}"#, status: 401) : tokens.protectedReply(request)
        }) { port, receiver, upstream, _ in
            let refreshesBefore = tokens.refreshes
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").status == 200)
            #expect(upstream.count == 2 && tokens.refreshes > refreshesBefore)
            let sent = try #require(upstream.requests.first?.header("traceparent"))
            let traceID = String(sent.split(separator: "-")[1])
            #expect(upstream.requests.last?.header("traceparent")?.contains(traceID) == true)
            #expect(upstream.requests.first?.header("traceparent") != upstream.requests.last?.header("traceparent"), "a new span per attempt")
            let tokenTraceparent = try #require(tokens.upstream.requests.last?.header("traceparent"), "the token endpoint got a traceparent")
            #expect(tokenTraceparent.contains(traceID))
            let spans = try await trace(traceID, in: receiver, count: 5)
            let server = try #require(spans.first { $0.kind == 2 })
            let clients = spans.filter { $0.kind == 3 }
            #expect(clients.filter { $0.name == "GET" }.map { $0.attribute("http.response.status_code") as? Int }.sorted { ($0 ?? 0) < ($1 ?? 0) } == [200, 401])
            let token = try #require(clients.first { $0.name == "POST token_endpoint" })
            #expect(tokenTraceparent.split(separator: "-")[2] == token.spanID)
            #expect(token.attribute("veneer.token_refresh") as? String == "granted")
            #expect(clients.allSatisfy { $0.parentSpanID == server.spanID })
            #expect(spans.contains { $0.kind == 1 && $0.name == "auth_refresh" })
        }
    }

    @Test("a refresh the background loop starts is a trace of its own: an internal root span, the token endpoint call its client child with the traceparent the endpoint received")
    func backgroundRefresh() async throws {
        var settings = TestTokenServer.Settings()
        settings.expiresIn = 2
        let tokens = try await TestTokenServer.start(settings: settings)
        defer { Task { await tokens.stop() } }
        let chain = "[{ auth_refresh: { token_url: \"\(tokens.url)\", client_id: veneer, client_secret: s3cret, refresh_token: rt-0, refresh_before_expiry: 1s } }]"
        try await withVeneer(chain: chain, upstream: { tokens.protectedReply($0) }) { port, receiver, upstream, _ in
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").status == 200)
            let requestTrace = try #require(upstream.requests.last?.header("traceparent")).split(separator: "-")[1]
            // A token lives 2 s: the loop refreshes it after 1 s, no request asking.
            var found: (root: OTLPReceiver.Span, call: OTLPReceiver.Span, sent: [Substring])?
            try await eventually("a refresh of the loop's own was exported as a trace") {
                for sent in tokens.upstream.requests.compactMap({ $0.header("traceparent")?.split(separator: "-") }) where sent.count == 4 {
                    let spans = receiver.spans.filter { $0.traceID == sent[1] }
                    if let root = spans.first(where: { $0.name == "auth_refresh refresh" }), let call = spans.first(where: { $0.kind == 3 }) {
                        found = (root, call, sent)
                        return true
                    }
                }
                return false
            }
            guard let found else { return }
            #expect(found.sent[1] != requestTrace, "not in the trace of a request")
            #expect(found.root.kind == 1 && found.root.parentSpanID.isEmpty)
            #expect(found.call.name == "POST token_endpoint" && found.call.spanID == found.sent[2] && found.call.parentSpanID == found.root.spanID)
            #expect(found.call.attribute("veneer.token_refresh") as? String == "granted")
        }
    }

    @Test("a cache's background refresh is in the trace of the read that started it: an internal span under that read's server span, its upstream request a client span below with a traceparent of its own; unsampled, the refresh sends Veneer's traceparent with the sampled flag off, never the caller's")
    func cacheRefreshTraced() async throws {
        let chain = "[{ cache: { stale_while_revalidate: 1h } }]"
        try await withVeneer(chain: chain, upstream: { _ in .json(#"{"id":1}"#, headers: [("Cache-Control", "max-age=1")]) }) { port, receiver, upstream, _ in
            for (path, traceID, callerSpan, flags) in [("/posts/1", "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", "01"),
                                                       ("/posts/2", "5cf92f3577b34da6a3ce929d0e0e4737", "00f067aa0ba902b8", "00")] {
                #expect(try await RawHTTP.request(port: port, "GET", path).status == 200)
                let stored = upstream.count
                // Once the copy is stale (max-age=1), a read is answered with it and refreshes it in the background.
                try await eventually("a read of \(path) is answered stale while it is refreshed") {
                    let answer = try await RawHTTP.request(port: port, "GET", path, headers: [("traceparent", "00-\(traceID)-\(callerSpan)-\(flags)")])
                    return answer.header("cache-status")?.contains("stale-while-revalidate") == true
                }
                try await eventually("the refresh of \(path) reached the upstream") { upstream.count > stored }
                let sent = try #require(upstream.requests.last?.header("traceparent")).split(separator: "-").map(String.init)
                #expect(sent.count == 4 && sent[1] == traceID && sent[2] != callerSpan && sent[3] == flags, "\(sent)")
                guard flags == "01", sent.count == 4 else { continue }
                var found: (server: OTLPReceiver.Span, root: OTLPReceiver.Span, call: OTLPReceiver.Span)?
                try await eventually("the refresh's spans arrive") {
                    let spans = receiver.spans.filter { $0.traceID == traceID }
                    guard let root = spans.first(where: { $0.name == "cache refresh" }), let call = spans.first(where: { $0.spanID == sent[2] }),
                          let server = spans.first(where: { $0.spanID == root.parentSpanID }) else { return false }
                    found = (server, root, call)
                    return true
                }
                guard let found else { continue }
                #expect(found.server.kind == 2 && found.server.parentSpanID == callerSpan)
                #expect((found.server.attribute("veneer.cache_status") as? String)?.contains("stale-while-revalidate") == true)
                #expect(found.root.kind == 1)
                #expect(found.call.kind == 3 && found.call.parentSpanID == found.root.spanID, "the upstream request is the refresh's client span")
                #expect(found.call.attribute("http.response.status_code") as? Int == 200)
            }
        }
    }

    @Test("a request the pool sends again on a new connection (its kept one closed before an answer) is a second client span: a span id of its own in its traceparent, both attempts under the server span")
    func resentAttempt() async throws {
        // Every connection answers its first request and closes on the second without answering.
        let upstream = try await ScriptedUpstream.start { received in
            received.indexOnConnection == 0 ? .reply(ScriptedUpstream.ok(#"{"id":1}"#)) : .close
        }
        defer { Task { await upstream.stop() } }
        let receiver = try await OTLPReceiver.start()
        defer { receiver.stop() }
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try """
            state_dir: \(directory)/state
            environments:
              development:
                telemetry: { endpoint: "\(receiver.url)" }
                origin: { upstream: { url: "\(upstream.url)" } }
                chain: []
            """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        // One event loop: one pool, so the second request finds the first one's connection.
        let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0", "--threads", "1"], directory: directory)
        defer { process.terminate() }
        let port = try await process.waitUntilReady()
        #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").status == 200)
        let traceID = "0af7651916cd43dd8448eb211c80319d"
        #expect(try await RawHTTP.request(port: port, "GET", "/posts/2", headers: [("traceparent", "00-\(traceID)-b7ad6b7169203331-01")]).status == 200)
        let attempts = upstream.received.filter { $0.text.hasPrefix("GET /posts/2 ") }
        #expect(attempts.count == 2 && upstream.connections == 2, "sent, closed, sent again on a new connection")
        let sent = attempts.compactMap { attempt in
            attempt.text.split(separator: "\r\n").first { $0.lowercased().hasPrefix("traceparent: ") }.map { $0.dropFirst(13).split(separator: "-") }
        }
        #expect(sent.count == 2 && sent.allSatisfy { $0.count == 4 && $0[1] == traceID })
        guard sent.count == 2 else { return }
        #expect(sent[0][2] != sent[1][2], "each attempt names a span of its own")
        let spans = try await trace(traceID, in: receiver, count: 3)
        let server = try #require(spans.first { $0.kind == 2 })
        let first = try #require(spans.first { $0.spanID == sent[0][2] }, "the first attempt is a span")
        let second = try #require(spans.first { $0.spanID == sent[1][2] }, "the second attempt is a span")
        #expect(first.kind == 3 && second.kind == 3)
        #expect(first.parentSpanID == server.spanID && second.parentSpanID == server.spanID)
        #expect(first.statusCode == 2 && first.attribute("http.response.status_code") == nil, "the first was not answered")
        #expect(second.attribute("http.response.status_code") as? Int == 200)
    }

    @Test("the admin API stays out of traces: a request to /-/ on the main listener exports no span")
    func adminNotTraced() async throws {
        try await withVeneer { port, receiver, upstream, _ in
            #expect(try await RawHTTP.request(port: port, "GET", "/-/status").status == 200)
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").status == 200)
            let traceID = try #require(upstream.requests.last?.header("traceparent")).split(separator: "-")[1]
            // Spans leave in the order their requests were answered: the admin request's would be here by now.
            _ = try await trace(String(traceID), in: receiver, count: 1)
            #expect(!receiver.spans.contains { ($0.attribute("url.path") as? String)?.hasPrefix("/-/") == true || $0.attribute("http.route") as? String == "/-/" })
        }
    }

    @Test("a caller's traceparent is continued (its tracestate passed on); a malformed one is ignored and a new trace starts")
    func continues() async throws {
        try await withVeneer(chain: "[]") { port, receiver, upstream, _ in
            let caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
            let answer = try await RawHTTP.request(port: port, "GET", "/posts/1", headers: [("traceparent", caller), ("tracestate", "congo=t61rcWkgMzE")])
            #expect(answer.status == 200)
            let sent = try #require(upstream.requests.last?.header("traceparent"))
            #expect(sent.hasPrefix("00-4bf92f3577b34da6a3ce929d0e0e4736-") && !sent.contains("00f067aa0ba902b7"), "\(sent)")
            #expect(upstream.requests.last?.header("tracestate") == "congo=t61rcWkgMzE")
            let spans = try await trace("4bf92f3577b34da6a3ce929d0e0e4736", in: receiver, count: 2)
            let server = try #require(spans.first { $0.kind == 2 })
            #expect(server.parentSpanID == "00f067aa0ba902b7")
            #expect(server.fields["trace_state"] as? String == "congo=t61rcWkgMzE")

            // Malformed (uppercase): ignored, never an error; its tracestate goes nowhere.
            let malformed = "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01"
            let second = try await RawHTTP.request(port: port, "GET", "/posts/2", headers: [("traceparent", malformed), ("tracestate", "congo=x")])
            #expect(second.status == 200)
            let replaced = try #require(upstream.requests.last?.header("traceparent"))
            #expect(!replaced.lowercased().contains("4bf92f3577b34da6a3ce929d0e0e4736") && replaced.count == 55, "\(replaced)")
            #expect(upstream.requests.last?.header("tracestate") == nil)
        }
    }

    @Test("Veneer's own refusals are spans with their reason: 404, 405, 421, and a request that could not be read")
    func refusals() async throws {
        try await withVeneer(chain: "[]") { port, receiver, _, _ in
            #expect(try await RawHTTP.request(port: port, "GET", "/nothing-here").status == 404)
            let misdirected = "GET /posts/1 HTTP/1.1\r\nHost: elsewhere.example\r\nConnection: close\r\n\r\n"
            #expect(try await RawHTTP.send(port: port, Array(misdirected.utf8)).status == 421)
            #expect(try await RawHTTP.send(port: port, Array("GARBAGE\r\n\r\n".utf8)).status == 400)
            try await eventually("three refusal spans arrive") { receiver.spans.filter { $0.attribute("veneer.refusal") != nil }.count >= 3 }
            let refusals = receiver.spans.filter { $0.attribute("veneer.refusal") != nil }
            let reasons = Set(refusals.compactMap { $0.attribute("veneer.refusal") as? String })
            #expect(reasons == ["not_found", "misdirected_request", "bad_request"], "\(reasons)")
            #expect(refusals.allSatisfy { $0.statusCode == 2 && $0.kind == 2 })
        }
    }

    @Test("sample: 0.1 keeps about a tenth of 1,000 new traces (within 5 standard deviations); a caller's sampled flag is followed")
    func sampler() async throws {
        try await withVeneer(telemetry: ", sample: 0.1", chain: "[]") { port, receiver, _, _ in
            for index in 0..<1000 {
                _ = try await RawHTTP.request(port: port, "GET", "/posts/\(index % 50 + 1)")
            }
            // Spans leave in order: once the marker's trace (sampled by its caller) is in, every earlier one is.
            let marker = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
            _ = try await RawHTTP.request(port: port, "GET", "/posts/1", headers: [("traceparent", marker)])
            _ = try await trace("0af7651916cd43dd8448eb211c80319c", in: receiver, count: 2)
            let sampled = receiver.spans.filter { $0.kind == 2 && $0.traceID != "0af7651916cd43dd8448eb211c80319c" }.count
            // Binomial(1000, 0.1): mean 100, standard deviation 9.5.
            #expect((53...147).contains(sampled), "\(sampled) of 1000 sampled")
        }
    }

    @Test("a collector that never answers costs no failed request: spans are dropped and counted")
    func collectorDown() async throws {
        // A batch hangs for 10 s: the queue (64) fills however slowly a loaded run sends the 300
        // requests (with 200 ms, batches timed out faster than they came at load 20: no queue_full).
        try await withVeneer(telemetry: ", timeout: 10s, queue: 64", chain: "[]", hang: true) { port, _, _, directory in
            let clock = ContinuousClock()
            let started = clock.now
            for index in 0..<300 {
                let answer = try await RawHTTP.request(port: port, "GET", "/posts/\(index % 10 + 1)")
                #expect(answer.status == 200)
            }
            // Nothing waits for the collector: 300 requests take far less than 300 timeouts.
            #expect(clock.now - started < .seconds(120))
            // The collector takes the connection and never answers: its batches time out.
            try await eventually("dropped spans are counted: queue full, and timed out", timeout: .seconds(60)) {
                let metrics = try await RawHTTP.request(port: port, "GET", "/-/metrics").text
                func dropped(_ reason: String) -> Int {
                    let name = "veneer_telemetry_spans_dropped_total{reason=\"\(reason)\"} "
                    return metrics.split(separator: "\n").first { $0.hasPrefix(name) }.flatMap { Int($0.dropFirst(name.count)) } ?? 0
                }
                return dropped("queue_full") > 0 && dropped("timeout") > 0 && dropped("export_failed") == 0
            }
            // And no memory growth: 1,000 more requests' spans are dropped, not held.
            let pid = try #require(Int32(try String(contentsOfFile: directory + "/veneer.pid", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
            let before = try ProcessProbe.residentBytes(of: pid) / 1024
            for index in 0..<1000 { _ = try await RawHTTP.request(port: port, "GET", "/posts/\(index % 10 + 1)") }
            let after = try ProcessProbe.residentBytes(of: pid) / 1024
            #expect(after - before < 8 * 1024, "resident memory grew from \(before) KB to \(after) KB")
        }
    }
}
