import Foundation
import HTTPTypes
import NIOCore
import NIOPosix
import Prometheus
import Synchronization
import Testing
import VeneerCore
import VeneerDecorators
import VeneerOrigins
import VeneerTestSupport

/// Every type that adopts a capability, run over the same scripted scenarios once in its fast
/// form and once through plain `handle`, each time from a fresh start: the answers must be
/// the same, and so must the effects (requests the inner handler or the upstream received,
/// metrics, log lines, the request records).
@Suite("capabilities: the fast forms answer as handle does, with the same effects")
struct CapabilityConformanceTests {
    /// One step of a scenario: a request, after moving the clock.
    struct Step: Sendable {
        var method: HTTPRequest.Method
        var target: String
        var headers: HTTPFields = [:]
        var body = ""
        var advance: Duration = .zero
    }

    /// What running a scenario gave.
    struct Outcome: Equatable {
        var answers: [String] = []
        var received: [String] = []
        var metrics = ""
        var logLines: [String] = []
        var records: [String] = []
    }

    /// The metrics text, one sample a line, sorted (the registry lists samples in no fixed order).
    static func metricsText(_ registry: PrometheusCollectorRegistry) -> String {
        registry.emitToString().split(separator: "\n").sorted().joined(separator: "\n")
    }

    static func describe(_ result: Result<ProxyResponse, any Error>) -> String {
        switch result {
        case .success(let response):
            let fields = response.headers.map { "\($0.name.rawName): \($0.value)" }.joined(separator: " | ")
            return "\(response.status.code) [\(fields)] \(String(buffer: response.body))"
        case .failure(let error):
            return "error \(error)"
        }
    }

    /// The record's entries, without durations (real time differs from run to run).
    static func describe(_ record: RequestRecord) -> String {
        record.entries.map { "\($0.name)=\($0.detail)\($0.duration == nil ? "" : " (timed)")" }.joined(separator: ", ")
    }

    /// With `traced`, the records trace (as for `Server-Timing`): latency_log notes its time too.
    static func run(_ steps: [Step], clock: ManualClock?, traced: Bool = false, _ answer: (ProxyRequest) async -> Result<ProxyResponse, any Error>) async
        -> (answers: [String], records: [String]) {
        var answers: [String] = []
        var records: [String] = []
        for (index, step) in steps.enumerated() {
            clock?.advance(by: step.advance)
            var request = CacheRig.request(step.method, step.target, body: step.body, headers: step.headers)
            request.requestID = "step-\(index)"
            if traced { request.record.trace(.serverTiming) }
            answers.append(describe(await answer(request)))
            records.append(describe(request.record))
        }
        return (answers, records)
    }

    // MARK: Immediate answers: cache, and latency_log in front of it

    /// Posts with validators and 10 s of freshness; 304 for a matching If-None-Match; a write
    /// answers 201/200; `/posts/9` fails once it has been fetched; a DELETE of 3 fails.
    final class ScriptedInner: Handler {
        private let received = Mutex<[String]>([])
        var log: [String] { received.withLock { $0 } }

        func handle(_ request: ProxyRequest) async throws -> ProxyResponse {
            let seen = received.withLock { log in
                log.append("\(request.method.rawValue) \(request.pathAndQuery) inm=\(request.headers[.ifNoneMatch] ?? "-")")
                return log.filter { $0.hasPrefix("GET /posts/9") }.count
            }
            switch (request.method, request.route.id) {
            case (.get, "9") where seen > 1:
                throw ProxyError.upstreamUnavailable("down")
            case (.delete, "3"):
                throw ProxyError.upstreamUnavailable("down")
            case (.get, let id?):
                if request.headers[.ifNoneMatch] == "\"\(id)\"" { return ProxyResponse(status: .notModified, headers: [.eTag: "\"\(id)\""]) }
                return .json(.ok, ByteBuffer(string: #"{"id":\#(id)}"#), headers: [.eTag: "\"\(id)\"", .cacheControl: "max-age=10"])
            case (.get, nil):
                return .json(.ok, ByteBuffer(string: "[]"), headers: [.cacheControl: "max-age=10"])
            case (.post, _):
                return .json(.created, ByteBuffer(string: #"{"id":42}"#), headers: [.location: "/posts/42"])
            default:
                return .json(.ok, ByteBuffer(string: #"{"id":1,"title":"u","body":"b"}"#))
            }
        }
    }

    static let cacheScenario: [Step] = [
        Step(method: .get, target: "/posts/1"),
        Step(method: .get, target: "/posts/1", advance: .seconds(2)),
        Step(method: .head, target: "/posts/1"),
        Step(method: .get, target: "/posts/1", headers: [.ifNoneMatch: "\"1\""]),
        Step(method: .get, target: "/posts/1", advance: .seconds(11)),
        Step(method: .get, target: "/posts?b=2&a=1"),
        Step(method: .get, target: "/posts?a=1&b=2"),
        Step(method: .get, target: "/posts/2", headers: [.authorization: "Bearer x"]),
        Step(method: .get, target: "/posts/2", headers: [.authorization: "Bearer x"]),
        Step(method: .post, target: "/posts", body: #"{"title":"t","body":"b"}"#),
        Step(method: .get, target: "/posts/42"),
        Step(method: .put, target: "/posts/1", body: #"{"title":"u","body":"b"}"#),
        Step(method: .get, target: "/posts?a=1&b=2"),
        Step(method: .get, target: "/posts/9"),
        Step(method: .get, target: "/posts/9", advance: .seconds(11)),
        Step(method: .delete, target: "/posts/3"),
        Step(method: .get, target: "/posts/3"),
    ]

    enum ImmediateForm: CaseIterable { case immediate, handle }

    /// The scenario through a cache (and, when `logged`, a latency_log in front of it), asked
    /// in one form.
    static func immediateOutcome(_ form: ImmediateForm, logged: Bool) async -> Outcome {
        let clock = ManualClock(start: Date(timeIntervalSince1970: 1_800_000_000))
        let registry = PrometheusCollectorRegistry()
        let metrics = PrometheusMetricsFactory(registry: registry)
        let inner = ScriptedInner()
        var options = CacheOptions()
        options.staleIfError = .seconds(60)
        let cache = CacheDecorator.make(inner: inner, options: options, clock: clock, metrics: metrics)
        let sink = CollectingSink()
        let handler: any ImmediateAnswering = logged
            ? LatencyLogDecorator(inner: cache, options: LatencyLogOptions(label: "0"), sink: sink, clock: clock, metrics: metrics)
            : cache
        let (answers, records) = await run(cacheScenario, clock: clock, traced: logged) { request in
            do {
                switch form {
                case .handle:
                    return .success(try await handler.handle(request))
                case .immediate:
                    switch handler.answerImmediately(request) {
                    case .answer(let response): return .success(response)
                    case .later(let rest): return .success(try await rest())
                    }
                }
            } catch {
                return .failure(error)
            }
        }
        return Outcome(answers: answers, received: inner.log, metrics: metricsText(registry), logLines: sink.lines, records: records)
    }

    @Test("cache and latency_log in front of it: immediate answers and the rest of the work, as handle", arguments: [false, true])
    func immediate(logged: Bool) async throws {
        let fast = await Self.immediateOutcome(.immediate, logged: logged)
        let plain = await Self.immediateOutcome(.handle, logged: logged)
        #expect(fast.answers == plain.answers)
        #expect(fast.received == plain.received)
        #expect(fast.metrics == plain.metrics)
        #expect(fast.logLines == plain.logLines)
        #expect(fast.records == plain.records)
        // The scenario exercised what it should, so that agreeing means something.
        #expect(plain.answers.contains { $0.contains("veneer; hit; ttl=") } && plain.answers.contains { $0.contains("fwd-status=304") })
        #expect(plain.answers.contains { $0.contains("detail=stale-if-error") } && plain.answers.contains { $0.hasPrefix("error ") })
        #expect(plain.logLines.count == (logged ? Self.cacheScenario.count : 0))
        let timed = logged ? "latency_log= (timed), " : ""
        #expect(plain.records.first == timed + "cache=miss stored" && plain.records[1] == timed + "cache=hit")
    }

    // MARK: Answers by callback: the upstream origin, and latency_log in front of it

    static let upstreamScenario: [Step] = [
        Step(method: .get, target: "/posts/1"),
        Step(method: .get, target: "/posts/404"),
        Step(method: .post, target: "/posts", body: #"{"title":"t","body":"b"}"#),
        Step(method: .get, target: "/posts?a=1", headers: [.xRequestID: "r-1", .authorization: "Bearer x"]),
        Step(method: .delete, target: "/posts/500"),
    ]

    enum CallbackForm: CaseIterable { case callback, handle }

    struct NotStarted: Error {}

    /// The scenario through the upstream origin (and, when `logged`, a latency_log in front
    /// of it), asked in one form, against a real upstream or, given `refusingPort`, one that
    /// cannot be reached.
    static func callbackOutcome(_ form: CallbackForm, logged: Bool, refusingPort: Int? = nil) async throws -> Outcome {
        let registry = PrometheusCollectorRegistry()
        let sink = CollectingSink()
        let provider = StandardTransportProvider()
        defer { Task { await provider.shutdown() } }
        return try await withTestUpstream({ request in
            switch request.target {
            case "/posts/404": return .json(#"{"error":"not_found"}"#, status: 404)
            case "/posts/500": return .json("{}", status: 500, headers: [("Retry-After", "1")])
            default: return .json(#"{"id":1}"#, headers: [("X-Upstream", request.method), ("ETag", "\"1\"")])
            }
        }) { (upstream: TestUpstream) async throws -> Outcome in
            let url = refusingPort.map { "http://127.0.0.1:\($0)" } ?? upstream.url
            // Generous deadlines: a loaded machine may take seconds for a local connection.
            let options = UpstreamOriginOptions(endpoint: Endpoint(url: url)!, timeout: .seconds(30),
                                                transport: TransportOptions(connectTimeout: .seconds(10)))
            let origin = UpstreamOrigin(options: options, transport: provider.transport(options.transport))
            let handler: any CallbackAnswering = logged
                ? LatencyLogDecorator(inner: origin, options: LatencyLogOptions(label: "0"), sink: sink, clock: ManualClock(),
                                      metrics: PrometheusMetricsFactory(registry: registry))
                : origin
            #expect(handler.startsWithoutTask)
            let loop = MultiThreadedEventLoopGroup.singleton.next()
            let (answers, records) = await run(upstreamScenario, clock: nil, traced: logged) { request in
                switch form {
                case .handle:
                    do { return .success(try await handler.handle(request)) } catch { return .failure(error) }
                case .callback:
                    return await withCheckedContinuation { continuation in
                        loop.execute {
                            let started = handler.startAnswer(request) { result in
                                #expect(loop.inEventLoop, "the answer comes on the loop it was asked on")
                                continuation.resume(returning: result)
                            }
                            if !started { continuation.resume(returning: .failure(NotStarted())) }
                        }
                    }
                }
            }
            let received = upstream.requests.map { request in
                "\(request.method) \(request.target) \(request.text) "
                    + request.headers.filter { !["host", "content-length", "connection"].contains($0.name) }.map { "\($0.name)=\($0.value)" }
                    .joined(separator: ",")
            }
            return Outcome(answers: answers, received: received, metrics: metricsText(registry), logLines: sink.lines, records: records)
        }
    }

    @Test("the upstream origin and latency_log in front of it: answers by callback on the loop, as handle", arguments: [false, true])
    func callback(logged: Bool) async throws {
        let fast = try await Self.callbackOutcome(.callback, logged: logged)
        let plain = try await Self.callbackOutcome(.handle, logged: logged)
        #expect(fast == plain)
        #expect(plain.received.count == Self.upstreamScenario.count && plain.answers.first?.hasPrefix("200 ") == true)
        #expect(plain.records.allSatisfy { $0 == (logged ? "latency_log= (timed), upstream= (timed)" : "upstream= (timed)") })
        #expect(!plain.answers.contains { $0.contains("NotStarted") })
        #expect(plain.logLines.count == (logged ? Self.upstreamScenario.count : 0))
        try await withRefusingPort { port in
            let fast = try await Self.callbackOutcome(.callback, logged: logged, refusingPort: port)
            let plain = try await Self.callbackOutcome(.handle, logged: logged, refusingPort: port)
            #expect(fast == plain, "an upstream that cannot be reached")
            #expect(plain.answers.allSatisfy { $0.contains("upstream_unavailable") })
            #expect(plain.logLines.count == (logged ? Self.upstreamScenario.count : 0))
        }
    }
}
