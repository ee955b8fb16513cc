import Foundation
import HTTPTypes
import NIOCore
import Prometheus
import Testing
import VeneerCore
import VeneerHTTP1
@testable import VeneerServer
import VeneerTestSupport

/// A connection's bookkeeping of its answers, fed the events a connection handler feeds it,
/// with real sinks: a Prometheus registry behind the edge's metrics, a request feed, an access
/// log file. No sockets.
@Suite("What a connection reports of its answers: metrics, the status page's feed, the access log")
struct AnswerObserverTests {
    /// Sinks that can be read back.
    final class Rig {
        let registry = PrometheusCollectorRegistry()
        let feed = RequestFeed(capacity: 8)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("veneer-observer-\(UUID().uuidString)").path
        let log: AccessLog
        var observer: AnswerObserver

        init(trace: Bool = false) throws {
            log = try AccessLog(output: .file(directory + "/access.log"), trace: trace)
            log.start()
            observer = AnswerObserver(AnswerObserver.Sinks(accessLog: log, metrics: EdgeMetrics(factory: PrometheusMetricsFactory(registry: registry)),
                                                           feed: feed),
                                      client: ClientAddress("127.0.0.1"), logger: quietLogger())
        }

        deinit { try? FileManager.default.removeItem(atPath: directory) }

        /// The value of the sample that starts with `prefix` (nil when there is none).
        func sample(_ prefix: String) -> Double? {
            registry.emitToString().split(separator: "\n").first { $0.hasPrefix(prefix + " ") }.flatMap { Double($0.split(separator: " ").last ?? "") }
        }

        var inFlight: Double? { sample("veneer_http_requests_in_flight") }

        /// The access log's lines, once every one queued is written.
        func lines() async throws -> [[String: Any]] {
            await log.close()
            return try String(contentsOfFile: directory + "/access.log", encoding: .utf8).split(separator: "\n").map { line in
                try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            }
        }
    }

    /// A request as the connection read it, `received` at `at` milliseconds.
    static func work(_ text: String, at milliseconds: Int64 = 1) throws -> ProxyRequestHandler.Work {
        var parser = HTTP1RequestParser(maxHeadSize: 4096, bodyLimit: 1024)
        parser.append(ByteBuffer(string: text))
        guard case .request(let head, let body)? = try parser.next() else { throw CancellationError() }
        return ProxyRequestHandler.Work(head: head, body: .complete(body), received: .uptimeNanoseconds(UInt64(milliseconds) * 1_000_000))
    }

    static func at(_ milliseconds: Int64) -> NIODeadline { .uptimeNanoseconds(UInt64(milliseconds) * 1_000_000) }

    @Test("an answer written: in flight until then, counted by route, method and status, in the feed, one line with its sizes, time and record")
    func written() async throws {
        let rig = try Rig()
        let work = try Self.work("POST /posts HTTP/1.1\r\nHost: x\r\nX-Request-Id: r-1\r\nUser-Agent: t/1\r\nContent-Length: 2\r\n\r\n{}")
        let started = rig.observer.started(work)
        let noted = try #require(started)
        #expect(noted.requestID == "r-1" && rig.inFlight == 1)
        noted.record.noteRoute("/posts")
        noted.record.noteOrigin("mock", time: .milliseconds(1))
        rig.observer.written(rig.observer.takeAnswering(), .json(.created, ByteBuffer(string: "{}"), headers: [.xRequestID: "r-1"]),
                             bytesOut: 120, now: Self.at(4))
        #expect(rig.inFlight == 0)
        #expect(rig.sample(#"veneer_http_requests_total{route="/posts",method="POST",status="201"}"#) == 1)
        #expect(rig.feed.recent().map { "\($0.method.rawValue) \($0.target) \($0.status) \($0.duration) \($0.requestID ?? "-")" }
                == ["POST /posts 201 0.003 seconds r-1"])
        let line = try #require(try await rig.lines().first)
        #expect(line["request_id"] as? String == "r-1" && line["http.route"] as? String == "/posts" && line["url.path"] as? String == "/posts")
        #expect(line["http.request.size"] as? Int == work.head.size + 2 && line["http.response.size"] as? Int == 120)
        #expect(line["duration_ms"] as? Double == 3 && line["origin_ms"] as? Double == 1 && line["user_agent.original"] as? String == "t/1")
    }

    @Test("the admin API's answers are counted and logged, never in the feed; a request's record traces what the log and an open status page read")
    func adminAndTracing() async throws {
        let rig = try Rig(trace: true)
        let watch = rig.feed.watch()
        let started = rig.observer.started(try Self.work("GET /-/status HTTP/1.1\r\nHost: x\r\n\r\n"))
        let noted = try #require(started)
        #expect(noted.record.tracing.contains(.log) && noted.record.tracing.contains(.watched) && noted.requestID.count == RequestID.length)
        noted.record.noteRoute("/-/")
        rig.observer.written(rig.observer.takeAnswering(), .json(.ok, ByteBuffer(string: "{}")), bytesOut: 80, now: Self.at(2))
        #expect(rig.feed.recent().isEmpty && rig.sample(#"veneer_http_requests_total{route="/-/",method="GET",status="200"}"#) == 1)
        _ = watch
        #expect(try await rig.lines().count == 1)
    }

    @Test("an answer discarded (the client left) is logged with nothing sent; one nothing observed is not")
    func discarded() async throws {
        let rig = try Rig()
        let started = rig.observer.started(try Self.work("GET /posts/1 HTTP/1.1\r\nHost: x\r\n\r\n"))
        #expect(started?.record != nil)
        rig.observer.discarded(rig.observer.takeAnswering(), .json(.ok, ByteBuffer(string: "{}")), now: Self.at(2))
        rig.observer.discarded(rig.observer.takeAnswering(), .json(.ok, ByteBuffer(string: "{}")), now: Self.at(3))
        #expect(rig.inFlight == 0)
        let lines = try await rig.lines()
        #expect(lines.count == 1 && lines.first?["http.response.size"] as? Int == 0)
    }

    @Test("a stream leaves the in-flight gauge as it starts, and is counted and logged when it ends, with every byte")
    func stream() async throws {
        let rig = try Rig()
        let started = rig.observer.started(try Self.work("GET /-/events HTTP/1.1\r\nHost: x\r\n\r\n"))
        let noted = try #require(started)
        noted.record.noteRoute("/-/")
        rig.observer.streamStarted(rig.observer.takeAnswering())
        #expect(rig.inFlight == 0 && rig.sample(#"veneer_http_requests_total{route="/-/",method="GET",status="200"}"#) == nil)
        rig.observer.streamEnded(ProxyResponse(status: .ok), bytesOut: 5000)
        #expect(rig.inFlight == 0 && rig.sample(#"veneer_http_requests_total{route="/-/",method="GET",status="200"}"#) == 1)
        #expect(try await rig.lines().first?["http.response.size"] as? Int == 5000)
    }

    @Test("what could not be read as a request is counted and logged, never in flight; one whose head was read keeps its method, route and path, and shows on the status page")
    func refused() async throws {
        let rig = try Rig()
        rig.observer.refused(nil, route: { _ in nil }, .json(.badRequest, ByteBuffer(string: "{}")), bytesOut: 90, now: Self.at(1))
        let interrupted = try Self.work("POST /posts HTTP/1.1\r\nHost: x\r\n\r\n").head
        rig.observer.refused((interrupted, 7), route: { $0 == "/posts" ? "/posts" : nil }, .json(.requestTimeout, ByteBuffer(string: "{}")),
                             bytesOut: 90, now: Self.at(2))
        #expect(rig.inFlight == 0)
        #expect(rig.sample(#"veneer_http_requests_total{route="unmatched",method="none",status="400"}"#) == 1)
        #expect(rig.sample(#"veneer_http_requests_total{route="/posts",method="POST",status="408"}"#) == 1)
        #expect(rig.feed.recent().map { "\($0.method.rawValue) \($0.target) \($0.status)" } == ["POST /posts 408"])
        let lines = try await rig.lines()
        #expect(lines.count == 2 && lines.last?["http.request.size"] as? Int == interrupted.size + 7)
    }

    @Test("cut at shutdown: the request answered 503 is counted and logged; nothing is reported without sinks")
    func cut() async throws {
        let rig = try Rig()
        let started = rig.observer.started(try Self.work("GET /posts/1 HTTP/1.1\r\nHost: x\r\nX-Request-Id: r-9\r\n\r\n"))
        #expect(started?.record != nil)
        let cut = rig.observer.takeAnswering()
        rig.observer.cut(cut, answeredWith: ProxyEdge.stamped(ProxyRequestHandler.shuttingDown, "r-9"), bytesOut: 200,
                         unanswered: [try Self.work("GET /posts/2 HTTP/1.1\r\nHost: x\r\n\r\n")])
        #expect(rig.inFlight == 0 && rig.sample(#"veneer_http_requests_total{route="unmatched",method="GET",status="503"}"#) == 1)
        #expect(try await rig.lines().first?["request_id"] as? String == "r-9")

        var silent = AnswerObserver(AnswerObserver.Sinks(accessLog: nil, metrics: nil, feed: nil), client: nil, logger: quietLogger())
        let unobserved = silent.started(try Self.work("GET /posts/1 HTTP/1.1\r\nHost: x\r\n\r\n"))
        #expect(unobserved?.requestID == nil)
    }
}
