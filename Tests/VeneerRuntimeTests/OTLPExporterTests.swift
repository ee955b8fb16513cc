import Foundation
import Logging
import NIOCore
import Prometheus
import ServiceLifecycle
import Synchronization
import Testing
import VeneerConfig
import VeneerCore
import VeneerOrigins
@testable import VeneerRuntime
import VeneerTestSupport

/// The span exporter against real local collectors (HTTP servers on 127.0.0.1): batches of at
/// most 512, a queue bounded by `queue`, drops counted by reason (`queue_full`,
/// `export_failed`, `timeout`), one request to the collector at a time, and an ``OTLPExporter/export(_:)``
/// that returns at once while the collector holds a request. The span counts are read from
/// the protobuf bodies with a walker of the wire format written here, not with the encoder.
@Suite("OTLP exporter")
struct OTLPExporterTests {
    /// An exporter to `port`, its metrics in a registry of its own.
    final class Rig: Sendable {
        let registry = PrometheusCollectorRegistry()
        let transports = StandardTransportProvider()
        let exporter: OTLPExporter

        init(port: Int, queue: Int = 2048, timeout: Duration = .seconds(5), interval: Duration = OTLPExporter.interval) {
            var spec = TelemetrySpec(endpoint: Endpoint(scheme: "http", host: "127.0.0.1", port: port, basePath: "/v1/traces"))
            spec.queue = queue
            spec.timeout = timeout
            var logger = Logger(label: "otlp-exporter-test")
            logger.logLevel = .critical
            exporter = OTLPExporter(spec: spec, headers: ["X-Api-Key": "secret"],
                                    transport: transports.transport(TransportOptions(connectTimeout: .seconds(2), connectionsPerLoop: 1)),
                                    factory: PrometheusMetricsFactory(registry: registry), logger: logger, interval: interval)
        }

        /// A counter's value (0 when it was never incremented).
        func counter(_ name: String) -> Int {
            let line = registry.emitToString().split(separator: "\n").first { $0.hasPrefix(name + " ") }
            return line.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0
        }

        func dropped(_ reason: String) -> Int { counter("veneer_telemetry_spans_dropped_total{reason=\"\(reason)\"}") }
        var exported: Int { counter("veneer_telemetry_spans_exported_total") }
    }

    /// One span of a trace of its own.
    static func span(_ number: Int) -> SpanNote {
        SpanNote(name: "GET /posts/{id}", kind: .server, traceID: .init(high: 1, low: UInt64(number + 1)), spanID: UInt64(number + 1),
                 parentSpanID: nil, start: 1_000, end: 2_000, attributes: [("http.response.status_code", .int(200))])
    }

    /// Spans in an `ExportTraceServiceRequest`: `resource_spans` (1) → `scope_spans` (2) → `spans` (2).
    static func spanCount(_ body: [UInt8]) -> Int {
        fields(body[...]).filter { $0.field == 1 }.reduce(0) { total, resource in
            total + fields(resource.value).filter { $0.field == 2 }.reduce(0) { $0 + fields($1.value).filter { $0.field == 2 }.count }
        }
    }

    /// The length-delimited fields of a message (other wire types skipped).
    static func fields(_ bytes: ArraySlice<UInt8>) -> [(field: Int, value: ArraySlice<UInt8>)] {
        var result: [(Int, ArraySlice<UInt8>)] = []
        var index = bytes.startIndex
        func varint() -> UInt64 {
            var value: UInt64 = 0, shift: UInt64 = 0
            while index < bytes.endIndex {
                let byte = bytes[index]
                index += 1
                value |= UInt64(byte & 0x7F) << shift
                if byte < 0x80 { break }
                shift += 7
            }
            return value
        }
        while index < bytes.endIndex {
            let key = varint()
            switch key & 7 {
            case 0: _ = varint()
            case 1: index += 8
            case 2:
                let length = Int(varint())
                result.append((Int(key >> 3), bytes[index..<(index + length)]))
                index += length
            case 5: index += 4
            default: return result
            }
        }
        return result
    }

    /// A request handler that holds every request until ``open()``, and tells how many it held at once.
    final class Gate: Sendable {
        private struct State {
            var open = false
            var waiting: [CheckedContinuation<Void, Never>] = []
            var inside = 0
            var mostInside = 0
        }
        private let state = Mutex(State())

        var mostAtOnce: Int { state.withLock { $0.mostInside } }
        var inside: Int { state.withLock { $0.inside } }

        func pass() async {
            await withCheckedContinuation { continuation in
                let now = state.withLock { state -> Bool in
                    state.inside += 1
                    state.mostInside = max(state.mostInside, state.inside)
                    if state.open { return true }
                    state.waiting.append(continuation)
                    return false
                }
                if now { continuation.resume() }
            }
            state.withLock { $0.inside -= 1 }
        }

        func open() {
            let waiting = state.withLock { state in
                state.open = true
                defer { state.waiting = [] }
                return state.waiting
            }
            for continuation in waiting { continuation.resume() }
        }
    }

    @Test("spans leave in batches of at most 512, as protobuf with the configured headers; all are counted as exported")
    func batches() async throws {
        try await withTestUpstream({ _ in UpstreamReply(status: 200, body: "") }) { collector in
            let rig = Rig(port: collector.port)
            for number in 0..<1100 { rig.exporter.export([Self.span(number)]) }
            await rig.exporter.drain()
            let requests = collector.requests
            #expect(requests.map { Self.spanCount($0.body) } == [512, 512, 76])
            #expect(requests.allSatisfy { $0.method == "POST" && $0.target == "/v1/traces" })
            #expect(requests.first?.header("Content-Type") == "application/x-protobuf")
            #expect(requests.first?.header("X-Api-Key") == "secret")
            #expect(rig.exported == 1100)
            #expect(rig.dropped("queue_full") == 0)
            await rig.transports.shutdown()
        }
    }

    @Test("a request's spans stay in one batch: 200 requests of 3 spans leave as 510 and 90")
    func requestsStayWhole() async throws {
        try await withTestUpstream({ _ in UpstreamReply(status: 200, body: "") }) { collector in
            let rig = Rig(port: collector.port)
            for number in 0..<200 { rig.exporter.export((3 * number..<3 * number + 3).map(Self.span)) }
            await rig.exporter.drain()
            #expect(collector.requests.map { Self.spanCount($0.body) } == [510, 90])
            #expect(rig.exported == 600)
            await rig.transports.shutdown()
        }
    }

    /// The span ids of the spans in an `ExportTraceServiceRequest`, in order.
    static func spanIDs(_ body: [UInt8]) -> [UInt64] {
        typealias Field = (field: Int, value: ArraySlice<UInt8>)
        func inner(_ outer: [Field], _ number: Int) -> [Field] { outer.filter { $0.field == number }.flatMap { fields($0.value) } }
        let spans: [Field] = inner(inner(fields(body[...]), 1), 2).filter { $0.field == 2 }
        let ids: [Field] = spans.flatMap { fields($0.value) }.filter { $0.field == 2 }
        return ids.map { id -> UInt64 in id.value.reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }
    }

    @Test("spans are encoded as requests queue them, each batch in the memory of the last one sent: every span arrives once, in order, none of an earlier batch again")
    func encodedAsQueued() async throws {
        try await withTestUpstream({ _ in UpstreamReply(status: 200, body: "") }) { collector in
            let rig = Rig(port: collector.port)
            // A first round fills three batches; the second, of fewer and larger requests, is
            // written into the buffer of the last one sent, and is shorter than what it held.
            for number in 0..<400 { rig.exporter.export((3 * number..<3 * number + 3).map(Self.span)) }
            await rig.exporter.drain()
            for number in 0..<20 { rig.exporter.export((1200 + 5 * number..<1205 + 5 * number).map(Self.span)) }
            await rig.exporter.drain()
            let requests = collector.requests
            #expect(requests.map { Self.spanCount($0.body) } == [510, 510, 180, 100])
            let received: [UInt64] = requests.flatMap { Self.spanIDs($0.body) }
            let sent: [UInt64] = (1...1300).map { UInt64($0) }
            #expect(received == sent)
            #expect(rig.exported == 1300)
            await rig.transports.shutdown()
        }
    }

    @Test("the queue holds `queue` spans: a request's spans that do not fit are dropped whole and counted as queue_full; a batch holds half a queue smaller than 1024")
    func queueBound() async throws {
        try await withTestUpstream({ _ in UpstreamReply(status: 200, body: "") }) { collector in
            let rig = Rig(port: collector.port, queue: 64)
            #expect(rig.exporter.limit == 32)
            for number in 0..<30 { rig.exporter.export([Self.span(2 * number), Self.span(2 * number + 1)]) }
            // 60 queued: 5 more do not fit (dropped whole), 4 do, and then not one more.
            rig.exporter.export((60..<65).map(Self.span))
            rig.exporter.export((65..<69).map(Self.span))
            rig.exporter.export([Self.span(69)])
            #expect(rig.dropped("queue_full") == 6)
            await rig.exporter.drain()
            #expect(collector.requests.map { Self.spanCount($0.body) } == [32, 32])
            #expect(rig.exported == 64)
            await rig.transports.shutdown()
        }
    }

    @Test("a collector that refuses (HTTP 500) or drops the connection: the batch is counted as export_failed")
    func exportFailed() async throws {
        try await withTestUpstream({ _ in UpstreamReply(status: 500, body: "{}") }) { collector in
            let rig = Rig(port: collector.port)
            for number in 0..<10 { rig.exporter.export([Self.span(number)]) }
            await rig.exporter.drain()
            #expect(collector.count == 1)
            #expect(rig.dropped("export_failed") == 10)
            #expect(rig.exported == 0)
            await rig.transports.shutdown()
        }
        let closing = try await ScriptedUpstream.start { _ in .close }
        let rig = Rig(port: closing.port)
        for number in 0..<7 { rig.exporter.export([Self.span(number)]) }
        await rig.exporter.drain()
        #expect(rig.dropped("export_failed") == 7)
        #expect(rig.dropped("timeout") == 0)
        await rig.transports.shutdown()
        await closing.stop()
    }

    @Test("a collector that does not answer within `timeout`: the batch is counted as timeout, and the next one goes out")
    func timeout() async throws {
        let silent = try await ScriptedUpstream.start { _ in .silence }
        // Three seconds of time-out: on a loaded run the second batch's new connection must reach
        // the collector before its time-out (200 ms did not, once, at load 7; 1 s did not, once,
        // at load 13).
        let rig = Rig(port: silent.port, timeout: .seconds(3))
        for number in 0..<600 { rig.exporter.export([Self.span(number)]) }
        await rig.exporter.drain()
        #expect(silent.received.count == 2)
        #expect(rig.dropped("timeout") == 600)
        #expect(rig.dropped("export_failed") == 0)
        await rig.transports.shutdown()
        await silent.stop()
    }

    @Test("one request to the collector at a time; while it is held, export returns at once, the queue fills to its bound and the rest is dropped; then the queue drains")
    func oneInFlightNeverBlocks() async throws {
        let gate = Gate()
        try await withTestUpstream({ _ in
            await gate.pass()
            return UpstreamReply(status: 200, body: "")
        }) { collector in
            // A time-out longer than any hold: a starved machine that opened the gate after the
            // default 5 s counted the held batch as timed out, never exported (512 short).
            let rig = Rig(port: collector.port, queue: 2048, timeout: .seconds(120))
            let running = Task { await rig.exporter.run() }
            // A full batch wakes the exporter at once: its request is held by the collector.
            for number in 0..<512 { rig.exporter.export([Self.span(number)]) }
            guard try await eventually("the first batch reached the collector", { gate.inside == 1 }) else { return }
            // Held: every export returns (this test would hang otherwise); the queue fills to
            // 2048 and the rest is dropped. (The exporter's timer may have sent a partial
            // batch before the first full one: the held request has at most 512.)
            for number in 512..<3000 { rig.exporter.export([Self.span(number)]) }
            let dropped = rig.dropped("queue_full")
            #expect(dropped >= 3000 - 512 - 2048)
            #expect(gate.inside == 1)
            gate.open()
            try await eventually("every queued span was exported (\(rig.exported) of \(3000 - dropped))") { rig.exported == 3000 - dropped }
            #expect(gate.mostAtOnce == 1)
            let sizes = collector.requests.map { Self.spanCount($0.body) }
            #expect(sizes.allSatisfy { $0 <= 512 } && sizes.reduce(0, +) == 3000 - dropped, "\(sizes)")
            running.cancel()
            await running.value
            await rig.transports.shutdown()
        }
    }

    @Test("a partial batch goes out on the exporter's timer")
    func partialBatchOnTimer() async throws {
        try await withTestUpstream({ _ in UpstreamReply(status: 200, body: "") }) { collector in
            let rig = Rig(port: collector.port)
            let running = Task { await rig.exporter.run() }
            for number in 0..<3 { rig.exporter.export([Self.span(number)]) }
            try await eventually("the partial batch was exported") { rig.exported == 3 }
            #expect(collector.requests.map { Self.spanCount($0.body) } == [3])
            running.cancel()
            await running.value
            await rig.transports.shutdown()
        }
    }

    @Test("a full batch goes out at once; the batch being filled waits for the timer, not for the last request to the collector to return")
    func fullBatchesBetweenTicks() async throws {
        try await withTestUpstream({ _ in UpstreamReply(status: 200, body: "") }) { collector in
            // A timer that does not fire during the test: only full batches go out.
            let rig = Rig(port: collector.port, interval: .seconds(3600))
            let running = Task { await rig.exporter.run() }
            for number in 0..<522 { rig.exporter.export([Self.span(number)]) }
            try await eventually("the full batch was exported") { rig.exported == 512 }
            // The ten left wait for more (sent as the first request returned, they were a
            // request of their own: one per round trip to the collector, whatever the traffic).
            for number in 522..<1024 { rig.exporter.export([Self.span(number)]) }
            try await eventually("the second full batch was exported (\(rig.exported))") { rig.exported == 1024 }
            #expect(collector.requests.map { Self.spanCount($0.body) } == [512, 512])
            #expect(collector.requests.flatMap { Self.spanIDs($0.body) }.elementsEqual(1...1024))
            running.cancel()
            await running.value
            await rig.transports.shutdown()
        }
    }

    @Test("at graceful shutdown the batch being filled goes out, the timer not waited for")
    func flushedAtShutdown() async throws {
        try await withTestUpstream({ _ in UpstreamReply(status: 200, body: "") }) { collector in
            let rig = Rig(port: collector.port, interval: .seconds(3600))
            let group = ServiceGroup(configuration: .init(services: [rig.exporter], logger: Logger(label: "otlp-exporter-test")))
            let running = Task { try await group.run() }
            for number in 0..<10 { rig.exporter.export([Self.span(number)]) }
            await group.triggerGracefulShutdown()
            try await running.value
            #expect(collector.requests.map { Self.spanCount($0.body) } == [10])
            #expect(rig.exported == 10)
            await rig.transports.shutdown()
        }
    }

    @Test("a batch appended request by request is the message encoded at once: the envelope's head written around the spans")
    func appendedIsEncoded() {
        let spans = (0..<5).map(Self.span)
        let envelope = OTLPTraceEncoder.Envelope(service: "veneer-test")
        var none: ByteBuffer?
        var batch = envelope.batch(reusing: &none, capacity: 16)
        for part in [spans[0..<1], spans[1..<4], spans[4..<5]] {
            OTLPTraceEncoder.append(part, bound: part.reduce(0) { $0 + SpanWriter.bound(of: $1) }, to: &batch)
        }
        envelope.close(&batch)
        let appended = Array(batch.readableBytesView)
        #expect(appended == Array(OTLPTraceEncoder.encode(spans, service: "veneer-test").readableBytesView))
        #expect(Self.spanIDs(appended) == [1, 2, 3, 4, 5])
    }

    @Test("the encoder's size bound holds for every field at its largest: lengths of 3 bytes, a negative integer's 10, a status and a tracestate")
    func encodingBound() {
        let long = String(repeating: "x", count: 70_000)
        let span = SpanNote(name: long, kind: .client, traceID: .init(high: .max, low: .max), spanID: .max, parentSpanID: .max,
                            start: .max, end: .max,
                            attributes: [(long, .string(long)), ("n", .int(.min)), ("b", .bool(true)), ("e", .string(""))],
                            error: long, traceState: long)
        let small = Self.span(1)
        let body = Array(OTLPTraceEncoder.encode([span, small, span], service: long).readableBytesView)
        let spans = Self.fields(body[...]).flatMap { Self.fields($0.value) }.filter { $0.field == 2 }.flatMap { Self.fields($0.value) }
            .filter { $0.field == 2 }
        #expect(spans.count == 3)
        // Each span's bytes with its tag (1) and padded length (5) within its bound.
        #expect(spans.map { $0.value.count + 6 } .elementsEqual([span, small, span].map(SpanWriter.bound)) { $0 <= $1 })
        #expect(spans.first.map { Self.fields($0.value).contains { $0.field == 5 && $0.value.count == 70_000 } } == true)
    }
}
