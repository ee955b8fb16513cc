import Foundation
import HTTPTypes
import Metrics
import NIOCore
import Prometheus
import Synchronization
import Testing
import VeneerCore
import VeneerDecorators
import VeneerTestSupport

@Suite("latency_log")
struct LatencyLogTests {
    func decorator(_ inner: any Handler, options: LatencyLogOptions = LatencyLogOptions(label: "0"), clock: any VeneerClock = ManualClock(),
                   sink: CollectingSink = CollectingSink(), registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) -> LatencyLogDecorator {
        LatencyLogDecorator(inner: inner, options: options, sink: sink, clock: clock, metrics: PrometheusMetricsFactory(registry: registry))
    }

    func object(_ line: String) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
    }

    @Test("one JSON line per request with time, id, method, route, path, status, duration, label and cache status")
    func line() async throws {
        let clock = ManualClock()
        let sink = CollectingSink()
        let inner = RecordingHandler { _ in
            clock.advance(by: .milliseconds(42))
            return ProxyResponse(status: .ok, headers: [.cacheStatus: "veneer; hit"], body: ByteBuffer(string: "{}"))
        }
        let log = decorator(inner, clock: clock, sink: sink)
        _ = try await log.handle(ProxyRequest(method: .get, route: .item(.posts, "13"), requestID: "req-1"))
        #expect(sink.lines.count == 1)
        let fields = try object(try #require(sink.lines.first))
        #expect(fields["request_id"] as? String == "req-1")
        #expect(fields["method"] as? String == "GET")
        #expect(fields["route"] as? String == "/posts/{id}")
        #expect(fields["path"] as? String == "/posts/13")
        #expect(fields["status"] as? Int == 200)
        #expect(fields["duration_ms"] as? Double == 42)
        #expect(fields["label"] as? String == "0")
        #expect(fields["cache"] as? String == "veneer; hit")
        #expect((fields["time"] as? String)?.hasSuffix("Z") == true)
        #expect(fields["slow"] == nil)
    }

    @Test("a sampled request's line carries its trace_id and span_id (telemetry); an unsampled one's does not")
    func traceIDs() async throws {
        let sink = CollectingSink()
        let log = decorator(RecordingHandler { _ in ProxyResponse(status: .ok) }, sink: sink)
        let traceID = TraceContext.TraceID(high: 0x4BF9_2F35_77B3_4DA6, low: 0xA3CE_929D_0E0E_4736)
        for sampled in [true, false] {
            let record = RequestRecord(trace: TraceContext(traceID: traceID, spanID: 0x00F0_67AA_0BA9_02B7, parentSpanID: nil, sampled: sampled, traceState: nil))
            _ = try await log.handle(ProxyRequest(method: .get, route: .item(.posts, "1"), record: record))
        }
        let sampled = try object(sink.lines[0]), unsampled = try object(sink.lines[1])
        #expect(sampled["trace_id"] as? String == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(sampled["span_id"] as? String == "00f067aa0ba902b7")
        #expect(unsampled["trace_id"] == nil && unsampled["span_id"] == nil)
    }

    @Test("an answer the inner handler starts without a task is passed on and logged when it comes, errors too; none, and nothing is logged")
    func startAnswer() throws {
        /// Answers post 1 and fails post 2 by callback (held until `release`), refuses the rest.
        final class Later: CallbackAnswering, @unchecked Sendable {
            var pending: [() -> Void] = []
            var startsWithoutTask: Bool { true }
            func handle(_ request: ProxyRequest) async throws -> ProxyResponse { ProxyResponse(status: .internalServerError) }
            func startAnswer(_ request: ProxyRequest, then done: @escaping @Sendable (Result<ProxyResponse, any Error>) -> Void) -> Bool {
                switch request.route.id {
                case "1": pending.append { done(.success(ProxyResponse(status: .ok))) }
                case "2": pending.append { done(.failure(ProxyError.upstreamTimeout("slow"))) }
                default: return false
                }
                return true
            }
        }
        let clock = ManualClock()
        let sink = CollectingSink()
        let inner = Later()
        let log = decorator(inner, clock: clock, sink: sink)
        #expect(log.startsWithoutTask && !decorator(RecordingHandler()).startsWithoutTask)
        let outcomes = Mutex<[String]>([])
        for id in [1, 2] {
            #expect(log.startAnswer(.getPost(id)) { result in
                outcomes.withLock { $0.append((try? result.get()).map { "\($0.status.code)" } ?? "error") }
            })
        }
        #expect(!log.startAnswer(.getPost(3)) { _ in Issue.record("answered a request it did not start") })
        #expect(!decorator(RecordingHandler(), sink: sink).startAnswer(.getPost(1)) { _ in Issue.record("started without a capable inner") })
        #expect(sink.lines.isEmpty, "nothing is logged before the answer comes")
        clock.advance(by: .milliseconds(7))
        for release in inner.pending { release() }
        #expect(outcomes.withLock { $0 } == ["200", "error"])
        #expect(sink.lines.count == 2)
        let ok = try object(sink.lines[0])
        let failed = try object(sink.lines[1])
        #expect(ok["status"] as? Int == 200 && ok["duration_ms"] as? Double == 7)
        #expect(failed["status"] as? Int == 504 && failed["error"] as? String == "upstream_timeout")
    }

    @Test("an answer the inner handler has immediately is passed on and logged; the rest of the work is logged when it has run")
    func answerImmediately() async throws {
        struct Immediate: ImmediateAnswering {
            var answersImmediately: Bool { true }
            func answerImmediately(_ request: ProxyRequest) -> ImmediateAnswer {
                if request.route.id == "1" { return .answer(ProxyResponse(status: .ok, headers: [.cacheStatus: "veneer; hit"])) }
                return .later(Deferred { ProxyResponse(status: .created) })
            }
        }
        let sink = CollectingSink()
        let log = decorator(Immediate(), sink: sink)
        #expect(!log.answersImmediately, "it only passes answers on")
        guard case .answer(let hit) = log.answerImmediately(.getPost(1)) else {
            Issue.record("the inner handler's immediate answer was not passed on")
            return
        }
        #expect(hit.status == .ok && sink.lines.count == 1)
        guard case .later(let rest) = log.answerImmediately(.getPost(2)) else {
            Issue.record("work left for later was answered")
            return
        }
        #expect(sink.lines.count == 1, "nothing is logged before the rest has run")
        #expect(try await rest().status == .created && sink.lines.count == 2)
        guard case .later(let plain) = decorator(RecordingHandler(), sink: sink).answerImmediately(.getPost(3)) else {
            Issue.record("a handler without the capability answered immediately")
            return
        }
        #expect(try await plain().status == .ok && sink.lines.count == 3)
        let fields = try sink.lines.map { try object($0) }
        #expect(fields.map { $0["path"] as? String } == ["/posts/1", "/posts/2", "/posts/3"])
        #expect(fields.map { $0["status"] as? Int } == [200, 201, 200] && fields[0]["cache"] as? String == "veneer; hit")
    }

    @Test("a line's text, byte for byte: its strings escaped as JSON, its duration to the microsecond, slow and error when so")
    func exactText() async throws {
        let clock = ManualClock()
        let sink = CollectingSink()
        let inner = RecordingHandler { request in
            clock.advance(by: .microseconds(1_234_567))
            guard request.method == .get else { throw ProxyError.upstreamTimeout("slow") }
            return ProxyResponse(status: .ok, headers: [.cacheStatus: "veneer; hit; ttl=3600"])
        }
        let log = decorator(inner, options: LatencyLogOptions(label: "edge \"one\"", slow: .milliseconds(500)), clock: clock, sink: sink)
        _ = try await log.handle(ProxyRequest(method: .get, route: .item(.posts, "13"), requestID: "a\"b\\c\n\u{1}é"))
        _ = try? await log.handle(ProxyRequest(method: .delete, route: .list(.posts), requestID: "req-2"))
        #expect(sink.lines == [
            #"{"time":"2027-01-15T08:00:01.234Z","request_id":"a\"b\\c\n\u0001é","method":"GET","route":"/posts/{id}","path":"/posts/13","status":200,"#
                + #""duration_ms":1234.567,"label":"edge \"one\"","cache":"veneer; hit; ttl=3600","slow":true}"#,
            #"{"time":"2027-01-15T08:00:02.469Z","request_id":"req-2","method":"DELETE","route":"/posts","path":"/posts","status":504,"#
                + #""duration_ms":1234.567,"label":"edge \"one\"","error":"upstream_timeout","slow":true}"#,
        ])
    }

    /// A wall clock that reads the times it is given, in turn (the last one from then on).
    final class ScriptedClock: VeneerClock {
        private let times: Mutex<[Date]>
        init(_ times: [Date]) { self.times = Mutex(times) }
        func now() -> Date { times.withLock { $0.count > 1 ? $0.removeFirst() : $0[0] } }
        func monotonic() -> Duration { .zero }
        func sleep(for duration: Duration) async throws {}
    }

    @Test("a line's time is the clock's to the millisecond, in one second and the next, and after the clock was set back")
    func timeText() async throws {
        // 2027-01-15T08:00:00Z and around it.
        let base = 1_800_000_000.0
        let times = [base + 1.2345, base + 1.99975, base + 1.0, base + 2.0005, base - 0.25, base + 86_400 * 365 + 59.0625]
        let sink = CollectingSink()
        let log = decorator(RecordingHandler(), clock: ScriptedClock(times.map { Date(timeIntervalSince1970: $0) }), sink: sink)
        for _ in times { _ = try await log.handle(.getPost(1)) }
        let written = try sink.lines.map { try object($0)["time"] as? String }
        #expect(written == ["2027-01-15T08:00:01.234Z", "2027-01-15T08:00:01.999Z", "2027-01-15T08:00:01.000Z", "2027-01-15T08:00:02.000Z",
                            "2027-01-15T07:59:59.750Z", "2028-01-15T08:00:59.062Z"])
        #expect(written == times.map { Timestamp.iso8601(Date(timeIntervalSince1970: $0)) })
    }

    @Test("requests over the slow threshold are flagged")
    func slow() async throws {
        let clock = ManualClock()
        let sink = CollectingSink()
        let inner = RecordingHandler { request in
            clock.advance(by: request.route.id == "1" ? .milliseconds(600) : .milliseconds(100))
            return ProxyResponse(status: .ok)
        }
        let log = decorator(inner, options: LatencyLogOptions(label: "edge", slow: .milliseconds(500)), clock: clock, sink: sink)
        _ = try await log.handle(.getPost(1))
        _ = try await log.handle(.getPost(2))
        #expect(try sink.lines.map { try object($0)["slow"] as? Bool } == [true, nil])
    }

    @Test("errors thrown inside are logged with their status and code, then passed on")
    func errors() async throws {
        let sink = CollectingSink()
        let log = decorator(RecordingHandler { _ in throw ProxyError.upstreamTimeout("slow") }, sink: sink)
        await #expect(throws: ProxyError.upstreamTimeout("slow")) { _ = try await log.handle(.getPost(1)) }
        let fields = try object(try #require(sink.lines.first))
        #expect(fields["status"] as? Int == 504)
        #expect(fields["error"] as? String == "upstream_timeout")
    }

    @Test("never logs bodies, queries, Authorization, Cookie or tokens")
    func secrets() async throws {
        let sink = CollectingSink()
        let log = decorator(RecordingHandler { _ in
            ProxyResponse(status: .ok, headers: [.setCookie: "session=SETCOOKIE"], body: ByteBuffer(string: #"{"secret":"RESPONSEBODY"}"#))
        }, sink: sink)
        _ = try await log.handle(ProxyRequest(
            method: .post, route: .list(.posts), query: "access_token=QUERYTOKEN",
            headers: [.authorization: "Bearer BEARERTOKEN", .cookie: "session=COOKIEVALUE"],
            body: ByteBuffer(string: #"{"title":"REQUESTBODY","body":"b"}"#)))
        let line = try #require(sink.lines.first)
        for secret in ["SETCOOKIE", "RESPONSEBODY", "QUERYTOKEN", "BEARERTOKEN", "COOKIEVALUE", "REQUESTBODY"] {
            #expect(!line.contains(secret), "\(secret) leaked into \(line)")
        }
    }

    @Test("several in one chain measure different spans, told apart by label")
    func nested() async throws {
        let clock = ManualClock()
        let sink = CollectingSink()
        let origin = RecordingHandler { _ in clock.advance(by: .milliseconds(10)); return ProxyResponse(status: .ok) }
        let inner = decorator(origin, options: LatencyLogOptions(label: "network"), clock: clock, sink: sink)
        let middle = RecordingHandler { request in clock.advance(by: .milliseconds(5)); return try await inner.handle(request) }
        let outer = decorator(middle, options: LatencyLogOptions(label: "total"), clock: clock, sink: sink)
        _ = try await outer.handle(.getPost(1))
        let lines = try sink.lines.map { try object($0) }
        #expect(lines.map { $0["label"] as? String } == ["network", "total"])
        #expect(lines.map { $0["duration_ms"] as? Double } == [10, 15])
    }

    @Test("durations feed the veneer_request_duration_seconds histogram")
    func histogram() async throws {
        let registry = PrometheusCollectorRegistry()
        let clock = ManualClock()
        let log = decorator(RecordingHandler { _ in clock.advance(by: .milliseconds(3)); return ProxyResponse(status: .ok) },
                            options: LatencyLogOptions(label: "0"), clock: clock, registry: registry)
        _ = try await log.handle(.getPost(1))
        _ = try await log.handle(.getPost(2))
        let text = registry.emitToString()
        #expect(text.contains(#"veneer_request_duration_seconds_count{label="0",method="GET",route="/posts/{id}",status="200"} 2"#))
        #expect(text.contains(#"veneer_request_duration_seconds_sum{label="0",method="GET",route="/posts/{id}",status="200"} 0.006"#))
    }

    @Test("a log file is appended to and reopened, so that rotation by rename works")
    func fileRotation() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("veneer-log-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/latency.log"
        let sink = try AppendingFileSink(path: path)
        let log = LatencyLogDecorator(inner: RecordingHandler(), options: LatencyLogOptions(label: "0", file: path), sink: sink,
                                      clock: ManualClock(), metrics: PrometheusMetricsFactory(registry: PrometheusCollectorRegistry()))
        _ = try await log.handle(.getPost(1))
        try FileManager.default.moveItem(atPath: path, toPath: path + ".1")
        _ = try await log.handle(.getPost(2))
        try sink.reopen()
        _ = try await log.handle(.getPost(3))
        // The lines are written by the sink's thread: closing writes what is queued.
        await sink.close()
        let rotated = try String(contentsOfFile: path + ".1", encoding: .utf8)
        let current = try String(contentsOfFile: path, encoding: .utf8)
        #expect(rotated.split(separator: "\n").count == 2)
        #expect(current.split(separator: "\n").count == 1 && current.contains("/posts/3"))
    }
}

/// The file sink's writer thread: what reaches the file, in what order, and what is dropped.
@Suite("latency_log file writer")
struct AppendingFileSinkTests {
    func line(_ text: String) -> ByteBuffer { ByteBuffer(string: text + "\n") }

    /// A FIFO nobody reads yet, standing for a disk that stopped: its 64 KB fill, then a
    /// write(2) waits. Its path, and the reader's end (non-blocking), for the test to read or close.
    func stalledFIFO(in directory: String) throws -> (path: String, reader: Int32) {
        let path = directory + "/stalled"
        try #require(mkfifo(path, 0o600) == 0)
        let reader = open(path, O_RDONLY | O_NONBLOCK)
        try #require(reader >= 0)
        return (path, reader)
    }

    @Test("every line arrives whole and in order, each writer's in its own order, once closed")
    func order() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/logs/latency.log"
        let sink = try AppendingFileSink(path: path)
        await withTaskGroup(of: Void.self) { group in
            for writer in 0..<4 {
                group.addTask { for n in 0..<5_000 { sink.write(line("{\"w\":\(writer),\"n\":\(n)}")) } }
            }
        }
        await sink.close()
        sink.write(line("after close"))
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 20_000)
        for writer in 0..<4 {
            let mine = lines.filter { $0.hasPrefix("{\"w\":\(writer),") }
            #expect(mine == (0..<5_000).map { "{\"w\":\(writer),\"n\":\($0)}"[...] }, "writer \(writer)'s lines, whole and in order")
        }
        #expect(sink.droppedLines == 1, "a line after close() is dropped")
    }

    @Test("lines queued before a reopen go to the old file, later ones to the new")
    func reopenKeepsOrder() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/latency.log"
        let sink = try AppendingFileSink(path: path)
        for n in 0..<1_000 { sink.write(line("old \(n)")) }
        try FileManager.default.moveItem(atPath: path, toPath: path + ".1")
        try sink.reopen()
        for n in 0..<1_000 { sink.write(line("new \(n)")) }
        await sink.close()
        #expect(try String(contentsOfFile: path + ".1", encoding: .utf8) == (0..<1_000).map { "old \($0)\n" }.joined())
        #expect(try String(contentsOfFile: path, encoding: .utf8) == (0..<1_000).map { "new \($0)\n" }.joined())
    }

    @Test("a file that does not take its lines never blocks the writer of a line: past the queue's bound lines are dropped and counted")
    func fullQueueDrops() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (path, reader) = try stalledFIFO(in: directory)
        defer { close(reader) }
        let registry = PrometheusCollectorRegistry()
        let dropped = Counter(label: "veneer_latency_log_dropped_lines_total", factory: PrometheusMetricsFactory(registry: registry))
        let sink = try AppendingFileSink(path: path, maxQueuedBytes: 16 << 10, dropped: dropped)
        let payload = String(repeating: "x", count: 90)
        let total = 4_000
        let writing = Task.detached { for n in 0..<total { sink.write(line(String(format: "%05d ", n) + payload)) } }
        // Before the writer thread, each line was written by its caller: this never ended.
        try await eventually("the 4,000 lines are handed over (the caller never waits)") { _ = await writing.result; return true }
        #expect(sink.droppedLines > 0)
        #expect(registry.emitToString().contains("veneer_latency_log_dropped_lines_total \(sink.droppedLines)"))
        // The reader takes what the FIFO holds until the writer has written all it kept.
        let closing = Task { await sink.close() }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        try await eventually("the writer ends once its queue is read") {
            let count = read(reader, &buffer, buffer.count)
            if count > 0 { received += buffer[0..<count] }
            return count <= 0 && received.last == UInt8(ascii: "\n")
                && received.count(where: { $0 == UInt8(ascii: "\n") }) + sink.droppedLines == total
        }
        await closing.value
        let lines = String(decoding: received, as: UTF8.self).split(separator: "\n")
        #expect(lines.allSatisfy { $0.count == 96 && $0.hasSuffix(payload) }, "each line whole")
        let numbers = lines.compactMap { Int($0.prefix(5)) }
        #expect(numbers == numbers.sorted() && Set(numbers).count == numbers.count, "in order, none twice")
        #expect(numbers.count + sink.droppedLines == total, "each line written or counted as dropped")
    }

    @Test("stopping does not wait for ever on a file that takes nothing: close gives up after closeWait (5 s), the writer left to finish on its own")
    func closeIsBounded() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (path, reader) = try stalledFIFO(in: directory)
        defer { close(reader) }
        let sink = try AppendingFileSink(path: path)
        // 200 KB of lines: more than the FIFO's 64 KB, so the writer's write(2) waits.
        for n in 0..<200 { sink.write(line(String(format: "%05d ", n) + String(repeating: "s", count: 1_000))) }
        let started = ContinuousClock.now
        let closing = Task { await sink.close() }
        let closed = Latch()
        Task { await closing.value; closed.open() }
        try await eventually("close returns while the file still takes nothing", timeout: .seconds(60)) { closed.isOpen }
        #expect(ContinuousClock.now - started >= AppendingFileSink.closeWait - .milliseconds(100), "it waited for the writer first")
        // Reading the FIFO lets the writer thread finish and end.
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var received = 0
        try await eventually("the writer, left to finish, writes the rest") {
            let count = read(reader, &buffer, buffer.count)
            if count > 0 { received += count }
            return received >= 200 * 1_007
        }
    }
    @Test("lines a failed write loses (a full disk: /dev/full) are counted as dropped, in the metric too")
    func failedWritesCounted() async throws {
        let registry = PrometheusCollectorRegistry()
        let dropped = Counter(label: "veneer_latency_log_dropped_lines_total", factory: PrometheusMetricsFactory(registry: registry))
        let sink = try AppendingFileSink(path: "/dev/full", dropped: dropped)
        for n in 0..<10 { sink.write(line("line \(n)")) }
        await sink.close()
        #expect(sink.droppedLines == 10)
        #expect(registry.emitToString().contains("veneer_latency_log_dropped_lines_total 10"))
    }
}
