import CoreMetrics
import HTTPTypes
import NIOCore
import NIOPosix
import Synchronization
import Testing
import VeneerCore
import VeneerOrigins
import VeneerTestSupport

@Suite("Upstream origin against a real local upstream")
struct UpstreamOriginTests {
    /// How a test reaches the upstream: plain HTTP through the pooled transport (what Veneer
    /// runs), by `handle` in a task or by `startAnswer` on an event loop without one; and
    /// through AsyncHTTPClient (what it uses for https). All keep the same contract.
    struct Way: Sendable, CustomTestStringConvertible {
        let kind: StandardTransportProvider.Kind
        let withoutTask: Bool
        var testDescription: String { "\(kind)\(withoutTask ? " without a task" : "")" }
    }

    static let ways = [Way(kind: .standard, withoutTask: false), Way(kind: .standard, withoutTask: true),
                       Way(kind: .asyncHTTPClient, withoutTask: false)]

    /// The origin, answering the way a test asks.
    struct TestedOrigin {
        let origin: UpstreamOrigin
        let way: Way

        struct NotStarted: Error {}

        func handle(_ request: ProxyRequest) async throws -> ProxyResponse {
            guard way.withoutTask else { return try await origin.handle(request) }
            let loop = MultiThreadedEventLoopGroup.singleton.next()
            return try await withCheckedThrowingContinuation { continuation in
                loop.execute {
                    let started = origin.startAnswer(request) { result in
                        #expect(loop.inEventLoop, "the answer comes on the loop it was asked on")
                        continuation.resume(with: result)
                    }
                    if !started { continuation.resume(throwing: NotStarted()) }
                }
            }
        }
    }

    /// An origin in front of `url`; its deadlines are generous unless a test sets `timeout`: a
    /// loaded machine running the tests side by side may take seconds for a local connection.
    func origin(_ url: String, timeout: Duration = .seconds(30), way: Way) -> (TestedOrigin, StandardTransportProvider) {
        let provider = StandardTransportProvider(kind: way.kind)
        let options = UpstreamOriginOptions(endpoint: Endpoint(url: url)!, timeout: timeout,
                                            transport: TransportOptions(connectTimeout: .seconds(10)))
        return (TestedOrigin(origin: UpstreamOrigin(options: options, transport: provider.transport(options.transport)), way: way), provider)
    }

    @Test("without a task only on the pooled transport's own event loops; AsyncHTTPClient always needs one")
    func withoutTaskWhere() async throws {
        try await withTestUpstream({ _ in .json("{}") }) { (upstream: TestUpstream) async throws in
            for kind in [StandardTransportProvider.Kind.standard, .asyncHTTPClient] {
                let (tested, provider) = origin(upstream.url, way: Way(kind: kind, withoutTask: false))
                #expect(tested.origin.startsWithoutTask == (kind == .standard), "known when the chain is built: \(kind)")
                #expect(!tested.origin.startAnswer(.getPost(1)) { _ in Issue.record("answered off the loop") }, "off any event loop: \(kind)")
                // Throws NotStarted where it cannot.
                let answered = (try? await TestedOrigin(origin: tested.origin, way: Way(kind: kind, withoutTask: true)).handle(.getPost(1)))?
                    .status == .ok
                #expect(answered == (kind == .standard), "on an event loop: \(kind)")
                await provider.shutdown()
            }
            #expect(upstream.requests.count == 1, "only the request started on the loop was sent")
            let (secure, provider) = origin("https://127.0.0.1:\(upstream.port)", way: Way(kind: .standard, withoutTask: false))
            #expect(!secure.origin.startsWithoutTask, "https goes through AsyncHTTPClient, which needs a task")
            await provider.shutdown()
        }
    }

    @Test("forwards method, canonical path under the prefix, query, body and end-to-end headers", arguments: ways)
    func forwards(way: Way) async throws {
        try await withTestUpstream({ _ in .json(#"{"id":5,"title":"t","body":"b","extra":1}"#, status: 201, headers: [("X-Upstream", "yes")]) }) { (upstream: TestUpstream) async throws in
            let (origin, provider) = origin(upstream.url + "/v1", way: way)
            defer { Task { await provider.shutdown() } }
            let request = ProxyRequest(
                method: .post, route: .list(.posts), query: "a=1&b=%20", headers: [.accept: "application/json", .xRequestID: "rid-1"],
                body: ByteBuffer(string: #"{"title":"t","body":"b"}"#), client: ClientAddress("10.1.2.3"), requestID: "rid-1")
            let response = try await origin.handle(request)
            #expect(response.status == .created)
            #expect(String(buffer: response.body).contains(#""extra":1"#))
            #expect(response.headers[HTTPField.Name("X-Upstream")!] == "yes")
            let received = try #require(upstream.requests.first)
            #expect(received.method == "POST")
            #expect(received.target == "/v1/posts?a=1&b=%20")
            #expect(received.host == "127.0.0.1:\(upstream.port)")
            #expect(received.text == #"{"title":"t","body":"b"}"#)
            #expect(received.header("accept") == "application/json")
            #expect(received.header("x-request-id") == "rid-1")
            #expect(received.header("x-forwarded-for") == "10.1.2.3")
        }
    }

    @Test("X-Forwarded-For is appended to, not replaced", arguments: ways)
    func forwardedFor(way: Way) async throws {
        try await withTestUpstream({ _ in .json("{}") }) { (upstream: TestUpstream) async throws in
            let (origin, provider) = origin(upstream.url, way: way)
            defer { Task { await provider.shutdown() } }
            _ = try await origin.handle(ProxyRequest(method: .get, route: .item(.posts, "1"), headers: [.xForwardedFor: "203.0.113.9"],
                                                     client: ClientAddress("::ffff:127.0.0.1")))
            #expect(upstream.requests.first?.header("x-forwarded-for") == "203.0.113.9, 127.0.0.1")
        }
    }

    @Test("the client's address goes after its fields, once, the query after the path; an empty X-Forwarded-For becomes the address",
          arguments: ways)
    func forwardedForPlace(way: Way) async throws {
        try await withTestUpstream({ _ in .json("{}") }) { (upstream: TestUpstream) async throws in
            let (origin, provider) = origin(upstream.url, way: way)
            defer { Task { await provider.shutdown() } }
            let client = ClientAddress("::ffff:127.0.0.1")
            _ = try await origin.handle(ProxyRequest(method: .get, route: .item(.posts, "1"), query: "nocache=abcdefghijklmnop-1",
                                                     headers: [.accept: "application/json", .userAgent: "t"], client: client))
            _ = try await origin.handle(ProxyRequest(method: .get, route: .item(.posts, "2"), headers: [.xForwardedFor: "", .accept: "a"],
                                                     client: client))
            let requests = upstream.requests
            try #require(requests.count == 2)
            #expect(requests[0].target == "/posts/1?nocache=abcdefghijklmnop-1")
            let watched: Set = ["accept", "user-agent", "x-forwarded-for"]
            #expect(requests[0].headers.map { $0.name.lowercased() }.filter(watched.contains) == ["accept", "user-agent", "x-forwarded-for"])
            #expect(requests[0].headers.filter { $0.name.lowercased() == "x-forwarded-for" }.map(\.value) == ["127.0.0.1"])
            #expect(requests[1].target == "/posts/2")
            #expect(requests[1].headers.filter { $0.name.lowercased() == "x-forwarded-for" }.map(\.value) == ["127.0.0.1"])
        }
    }

    @Test("the request head goes as the fields say, whatever its size: many long fields, UTF-8 values, hop-by-hop and Host left out",
          arguments: ways)
    func requestHead(way: Way) async throws {
        try await withTestUpstream({ _ in .json("{}") }) { (upstream: TestUpstream) async throws in
            let (origin, provider) = origin(upstream.url + "/api/v2", way: way)
            defer { Task { await provider.shutdown() } }
            let id = "abcdefghijklmnopqrstuvwxyz0123"
            // The edge strips hop-by-hop fields before any origin; the pooled transport's writer
            // drops them (and Host) again, which is what is checked here on its ways.
            let pooled = way.kind == .standard
            var large: HTTPFields = pooled ? [HTTPField.Name("Host")!: "elsewhere.example", .connection: "keep-alive", .te: "trailers", .accept: "a"]
                : [.accept: "a"]
            for index in 0..<40 { large.append(HTTPField(name: HTTPField.Name("X-Field-\(index)")!, value: String(repeating: "v\(index % 10)", count: 150))) }
            if pooled { large.append(HTTPField(name: HTTPField.Name("Keep-Alive")!, value: "timeout=5")) }
            large.append(HTTPField(name: HTTPField.Name("X-Text")!, value: "café ✓"))
            // Small, large, small again: a connection's buffer grows and is reused.
            let requests = [
                ProxyRequest(method: .get, route: .item(.posts, "7"), headers: [.accept: "b"], client: ClientAddress("10.0.0.1")),
                ProxyRequest(method: .get, route: .item(.posts, id), query: "q=1", headers: large, client: ClientAddress("10.0.0.2")),
                ProxyRequest(method: .get, route: .list(.posts), headers: [.userAgent: "u"]),
            ]
            for request in requests { _ = try await origin.handle(request) }
            let received = upstream.requests
            try #require(received.count == 3)
            #expect(received.map(\.target) == ["/api/v2/posts/7", "/api/v2/posts/\(id)?q=1", "/api/v2/posts"])
            #expect(received.allSatisfy { $0.host == "127.0.0.1:\(upstream.port)" })
            #expect(received[0].header("accept") == "b" && received[0].header("x-forwarded-for") == "10.0.0.1")
            let sent = received[1].headers.filter { !["host", "connection", "content-length", "user-agent"].contains($0.name.lowercased()) }
            var expected = [("accept", "a")]
            for index in 0..<40 { expected.append(("x-field-\(index)", String(repeating: "v\(index % 10)", count: 150))) }
            expected += [("x-text", "café ✓"), ("x-forwarded-for", "10.0.0.2")]
            #expect(sent.map { $0.name.lowercased() } == expected.map(\.0))
            #expect(sent.map(\.value) == expected.map(\.1))
            #expect(received[1].header("te") == nil && received[1].header("keep-alive") == nil)
            #expect(received[2].header("user-agent") == "u" && received[2].header("x-forwarded-for") == nil)
        }
    }

    @Test("with telemetry the upstream gets exactly one traceparent, Veneer's in place of the caller's, and the caller's tracestate only with its trace continued; without, the caller's own as they came",
          arguments: ways)
    func traceFields(way: Way) async throws {
        try await withTestUpstream({ _ in .json("{}") }) { (upstream: TestUpstream) async throws in
            let (origin, provider) = origin(upstream.url, way: way)
            defer { Task { await provider.shutdown() } }
            let callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736", callerSpan = "00f067aa0ba902b7"
            let caller = "00-\(callerTrace)-\(callerSpan)-01"
            let traceState = HTTPField.Name("tracestate")!, traceParent = HTTPField.Name("traceparent")!
            /// What the upstream got for a request with `fields`, in a trace as the edge starts
            /// one when `telemetry` (nothing sampled but what a caller's flag says).
            func sent(_ fields: HTTPFields, telemetry: Bool = true) async throws -> (traceparent: [String], tracestate: [String], other: [String]) {
                var ids = TraceIDGenerator()
                let trace = telemetry ? TraceContext.start(traceparent: fields[traceParent], tracestate: fields[traceState],
                                                           sampler: TraceSampler(ratio: 0), ids: &ids) : nil
                _ = try await origin.handle(ProxyRequest(method: .get, route: .item(.posts, "1"), headers: fields, record: RequestRecord(trace: trace)))
                let received = try #require(upstream.requests.last)
                func values(_ name: String) -> [String] { received.headers.filter { $0.name.lowercased() == name }.map(\.value) }
                return (values("traceparent"), values("tracestate"), values("accept") + values("x-after"))
            }
            // Continued: the caller's trace, a new span, its sampled flag; its tracestate passed on.
            let continued = try await sent([.accept: "a", traceParent: caller, traceState: "congo=t61rcWkgMzE", HTTPField.Name("X-After")!: "z"])
            try #require(continued.traceparent.count == 1, "exactly one traceparent: \(continued.traceparent)")
            let parts = continued.traceparent[0].split(separator: "-").map(String.init)
            #expect(parts.count == 4 && parts[0] == "00" && parts[1] == callerTrace && parts[2] != callerSpan && parts[3] == "01")
            #expect(continued.tracestate == ["congo=t61rcWkgMzE"])
            #expect(continued.other == ["a", "z"], "the caller's other fields pass as they came")
            // The caller's names in any case are the same fields: replaced, not sent beside Veneer's.
            let cased = try await sent([HTTPField.Name("TraceParent")!: caller, HTTPField.Name("TRACESTATE")!: "congo=u"])
            try #require(cased.traceparent.count == 1, "exactly one traceparent: \(cased.traceparent)")
            #expect(cased.traceparent[0].contains(callerTrace) && !cased.traceparent[0].contains(callerSpan) && cased.tracestate == ["congo=u"])
            // Malformed (uppercase): a new trace, unsampled here; the caller's tracestate goes nowhere.
            let malformed = try await sent([traceParent: caller.uppercased(), traceState: "congo=x"])
            try #require(malformed.traceparent.count == 1, "exactly one traceparent: \(malformed.traceparent)")
            #expect(!malformed.traceparent[0].contains(callerTrace) && malformed.traceparent[0].hasSuffix("-00"))
            #expect(malformed.traceparent[0].count == 55 && TraceContext.parseParent(malformed.traceparent[0]) != nil)
            #expect(malformed.tracestate.isEmpty)
            // Two of the caller's (not one valid value): both replaced by one.
            var twice: HTTPFields = [traceParent: caller, traceState: "a=1"]
            twice.append(HTTPField(name: traceParent, value: caller))
            let doubled = try await sent(twice)
            #expect(doubled.traceparent.count == 1 && doubled.traceparent.first != caller && doubled.tracestate.isEmpty)
            // None from the caller: Veneer's alone.
            let fresh = try await sent([.accept: "b"])
            #expect(fresh.traceparent.count == 1 && fresh.tracestate.isEmpty && fresh.other == ["b"])
            // Telemetry off: Veneer adds none, and the caller's go as they came.
            let off = try await sent([traceParent: caller, traceState: "congo=t61rcWkgMzE"], telemetry: false)
            #expect(off.traceparent == [caller] && off.tracestate == ["congo=t61rcWkgMzE"])
            let none = try await sent([.accept: "c"], telemetry: false)
            #expect(none.traceparent.isEmpty && none.tracestate.isEmpty)
        }
    }

    @Test("hop-by-hop headers of the upstream's response are not passed back", arguments: ways)
    func responseHopByHop(way: Way) async throws {
        try await withTestUpstream({ _ in
            .json("{}", headers: [("Connection", "X-Hop"), ("X-Hop", "1"), ("Keep-Alive", "timeout=5"), ("X-End", "2")])
        }) { (upstream: TestUpstream) async throws in
            // The upstream really sends them...
            let direct = try await RawHTTP.request(port: upstream.port, "GET", "/posts/1")
            #expect(direct.header("X-Hop") == "1" && direct.header("Keep-Alive") == "timeout=5")
            // ...and the origin drops them.
            let (origin, provider) = origin(upstream.url, way: way)
            defer { Task { await provider.shutdown() } }
            let response = try await origin.handle(.getPost(1))
            #expect(response.headers[HTTPField.Name("X-Hop")!] == nil)
            #expect(response.headers[HTTPField.Name("Keep-Alive")!] == nil)
            #expect(response.headers[.connection] == nil)
            #expect(response.headers[HTTPField.Name("X-End")!] == "2")
        }
    }

    @Test("redirects come back to the caller instead of being followed", arguments: ways)
    func redirects(way: Way) async throws {
        try await withTestUpstream({ _ in UpstreamReply(status: 302, headers: [("Location", "/posts/2")], body: "") }) { (upstream: TestUpstream) async throws in
            let (origin, provider) = origin(upstream.url, way: way)
            defer { Task { await provider.shutdown() } }
            let response = try await origin.handle(.getPost(1))
            #expect(response.status == .found)
            #expect(response.headers[.location] == "/posts/2")
            #expect(upstream.count == 1)
        }
    }

    @Test("upstream 4xx and 5xx answers are passed through unchanged", arguments: ways)
    func upstreamErrors(way: Way) async throws {
        try await withTestUpstream({ _ in .json(#"{"message":"nope"}"#, status: 503, headers: [("Retry-After", "7")]) }) { (upstream: TestUpstream) async throws in
            let (origin, provider) = origin(upstream.url, way: way)
            defer { Task { await provider.shutdown() } }
            let response = try await origin.handle(.getPost(1))
            #expect(response.status == .serviceUnavailable)
            #expect(String(buffer: response.body) == #"{"message":"nope"}"#)
            #expect(response.headers[.retryAfter] == "7")
        }
    }

    @Test("an unreachable upstream is 502 upstream_unavailable", arguments: ways)
    func unreachable(way: Way) async throws {
        try await withRefusingPort { port in
            let (origin, provider) = origin("http://127.0.0.1:\(port)", way: way)
            defer { Task { await provider.shutdown() } }
            await #expect(throws: ProxyError.self) {
                do {
                    _ = try await origin.handle(.getPost(1))
                } catch let error as ProxyError {
                    #expect(error.code == .upstreamUnavailable)
                    throw error
                }
            }
        }
    }

    /// Counts what its timers record (its other metrics record nothing).
    final class CountingTimers: MetricsFactory, TimerHandler {
        let recorded = Mutex(0)
        var count: Int { recorded.withLock { $0 } }
        func recordNanoseconds(_ duration: Int64) { recorded.withLock { $0 += 1 } }
        func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler { NOOPMetricsHandler.instance }
        func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler { NOOPMetricsHandler.instance }
        func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler { self }
        func destroyCounter(_ handler: any CounterHandler) {}
        func destroyRecorder(_ handler: any RecorderHandler) {}
        func destroyTimer(_ handler: any TimerHandler) {}
    }

    @Test("the upstream's time is noted once, in the record and the histogram, before the answer or the failure is handed on",
          arguments: ways)
    func timeNoted(way: Way) async throws {
        /// Whether the time was in the record, and how many times the histogram had it, when the outcome came.
        func outcome(_ url: String) async -> (noted: Bool, recorded: Int, failed: Bool) {
            let timers = CountingTimers()
            let provider = StandardTransportProvider(kind: way.kind)
            let options = UpstreamOriginOptions(endpoint: Endpoint(url: url)!, timeout: .seconds(30),
                                                transport: TransportOptions(connectTimeout: .seconds(10)))
            let origin = UpstreamOrigin(options: options, transport: provider.transport(options.transport),
                                        durations: CoreMetrics.Timer(label: "upstream", factory: timers))
            let request = ProxyRequest.getPost(1)
            let seen: (noted: Bool, recorded: Int, failed: Bool)
            if way.withoutTask {
                let loop = MultiThreadedEventLoopGroup.singleton.next()
                seen = await withCheckedContinuation { continuation in
                    loop.execute {
                        let started = origin.startAnswer(request) { result in
                            let failed: Bool
                            switch result {
                            case .success: failed = false
                            case .failure: failed = true
                            }
                            continuation.resume(returning: (request.record.originTime != nil, timers.count, failed))
                        }
                        if !started { continuation.resume(returning: (false, -1, true)) }
                    }
                }
            } else {
                let failed: Bool
                do {
                    _ = try await origin.handle(request)
                    failed = false
                } catch {
                    failed = true
                }
                seen = (request.record.originTime != nil, timers.count, failed)
            }
            #expect(timers.count == 1 && request.record.entries.filter { $0.name == "upstream" }.count == 1, "noted once: \(url)")
            await provider.shutdown()
            return seen
        }
        try await withTestUpstream({ _ in .json("{}") }) { (upstream: TestUpstream) async throws in
            let answered = await outcome(upstream.url)
            #expect(answered.noted && answered.recorded == 1 && !answered.failed)
        }
        try await withRefusingPort { port in
            let refused = await outcome("http://127.0.0.1:\(port)")
            #expect(refused.noted && refused.recorded == 1 && refused.failed)
        }
    }

    @Test("a slow upstream is 504 upstream_timeout after the timeout", arguments: ways)
    func timeout(way: Way) async throws {
        try await withTestUpstream({ _ in UpstreamReply(body: "{}", delay: .seconds(3)) }) { (upstream: TestUpstream) async throws in
            let (origin, provider) = origin(upstream.url, timeout: .milliseconds(300), way: way)
            defer { Task { await provider.shutdown() } }
            let start = ContinuousClock.now
            do {
                _ = try await origin.handle(.getPost(1))
                Issue.record("expected a timeout")
            } catch let error as ProxyError {
                #expect(error.code == .upstreamTimeout)
            }
            #expect(ContinuousClock.now - start < .seconds(2))
        }
    }

    @Test("a response larger than the limit is refused, not buffered", arguments: ways)
    func oversized(way: Way) async throws {
        try await withTestUpstream({ _ in .json(String(repeating: "x", count: 10_000)) }) { (upstream: TestUpstream) async throws in
            let provider = StandardTransportProvider(kind: way.kind)
            defer { Task { await provider.shutdown() } }
            // The generous deadlines of origin(_:): a loaded machine (a whole-suite run) once
            // took longer than the default 10 s, and the test saw a timeout, not the refusal.
            let options = UpstreamOriginOptions(endpoint: Endpoint(url: upstream.url)!, timeout: .seconds(30),
                                                transport: TransportOptions(connectTimeout: .seconds(10)))
            let origin = TestedOrigin(origin: UpstreamOrigin(options: options, transport: provider.transport(options.transport), maxResponseBodySize: 1000),
                                      way: way)
            let error = await #expect(throws: ProxyError.self) {
                _ = try await origin.handle(.getPost(1))
            }
            #expect(error?.code == .upstreamUnavailable && error?.message == "The upstream's response is larger than allowed.", "\(String(describing: error))")
            #expect(error?.detail?.contains("1000 bytes") == true, "the limit is for the log")
        }
    }
}
