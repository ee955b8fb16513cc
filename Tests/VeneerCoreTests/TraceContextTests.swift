import Testing
import VeneerCore

/// A generator that returns the values it is given, in turn, for ids that tests can name.
struct ScriptedIDs: RandomNumberGenerator {
    var values: [UInt64]
    mutating func next() -> UInt64 { values.isEmpty ? 0x1234 : values.removeFirst() }
}

@Suite("W3C Trace Context: traceparent parsed, continued and passed on")
struct TraceContextTests {
    static let valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    @Test("a valid traceparent parses into trace id, parent id and flags")
    func parsesValid() throws {
        let parent = try #require(TraceContext.parseParent(Self.valid))
        #expect(parent.traceID.hex == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(parent.spanID == 0x00F0_67AA_0BA9_02B7)
        #expect(parent.flags == 1)
        #expect(parent.sampled)
        #expect(try #require(TraceContext.parseParent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")).sampled == false)
    }

    @Test("malformed traceparents are ignored, as the specification says", arguments: [
        "",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",  // too short
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",  // version 00 with more
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  // uppercase
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  // all-zero trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  // all-zero parent id
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  // version ff
        "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  // wrong separator
        "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",  // not hex
        "0-04bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  // shifted
        "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",  // later version, no dash after 55
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01, 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    ])
    func ignoresMalformed(_ value: String) {
        #expect(TraceContext.parseParent(value) == nil)
    }

    @Test("a traceparent parses alike from a String and a Substring, on their own bytes")
    func parsesAnyString() throws {
        let value = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        let parsed = try #require(TraceContext.parseParent(value))
        #expect(TraceContext.parseParent(("x" + value + "x").dropFirst().dropLast()) == parsed)
        #expect(TraceContext.parseParent(value.dropLast()) == nil)
    }

    @Test("a later version is read as version 00, what follows its 55 characters ignored")
    func laterVersion() throws {
        let parent = try #require(TraceContext.parseParent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09-what-comes-next"))
        #expect(parent.traceID.hex == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(parent.sampled)
        #expect(TraceContext.parseParent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09") != nil)
    }

    @Test("a caller's trace is continued: same trace id, a new span id, its span the parent, its tracestate passed on")
    func continues() {
        var ids = ScriptedIDs(values: [0xABCD])
        let context = TraceContext.start(traceparent: Self.valid, tracestate: "congo=t61rcWkgMzE", sampler: TraceSampler(ratio: 0), ids: &ids)
        #expect(context.traceID.hex == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(context.spanID == 0xABCD)
        #expect(context.parentSpanID == 0x00F0_67AA_0BA9_02B7)
        // Parent-based: the caller sampled it, so it is recorded whatever the ratio.
        #expect(context.sampled)
        #expect(context.traceState == "congo=t61rcWkgMzE")
        #expect(context.traceparent(spanID: 0x42) == "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000042-01")
    }

    @Test("without a valid traceparent a new trace starts, and a tracestate alone is dropped")
    func newTrace() {
        var ids = ScriptedIDs(values: [7, 1, 2])
        let context = TraceContext.start(traceparent: "00-garbage", tracestate: "congo=t61rcWkgMzE", sampler: TraceSampler(ratio: 1), ids: &ids)
        #expect(context.spanID == 7)
        #expect(context.traceID == TraceContext.TraceID(high: 1, low: 2))
        #expect(context.parentSpanID == nil)
        #expect(context.traceState == nil)
        #expect(context.sampled)
        #expect(context.traceparent(spanID: 7) == "00-00000000000000010000000000000002-0000000000000007-01")
    }

    @Test("a caller's unsampled flag is followed by a parent-based sampler, not by a plain ratio")
    func parentBased() {
        let unsampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
        var ids = ScriptedIDs(values: [])
        #expect(!TraceContext.start(traceparent: unsampled, tracestate: nil, sampler: TraceSampler(ratio: 1), ids: &ids).sampled)
        #expect(TraceContext.start(traceparent: unsampled, tracestate: nil, sampler: TraceSampler(ratio: 1, parentBased: false), ids: &ids).sampled)
        let context = TraceContext.start(traceparent: unsampled, tracestate: nil, sampler: TraceSampler(ratio: 1), ids: &ids)
        #expect(context.traceparent(spanID: 1).hasSuffix("-00"))
    }

    @Test("the ratio sampler keeps its share of random trace ids")
    func ratio() {
        var ids = SystemRandomNumberGenerator()
        let sampler = TraceSampler(ratio: 0.1)
        let kept = (0..<20_000).filter { _ in sampler.samples(TraceContext.TraceID(high: ids.next(), low: ids.next()), parentSampled: nil) }.count
        // 2,000 expected; 6 standard deviations (about 42 each) either side.
        #expect((1_750...2_250).contains(kept))
        #expect(!TraceSampler(ratio: 0).samples(TraceContext.TraceID(high: 1, low: 1), parentSampled: nil))
    }

    @Test("tracestate is passed on only when printable and at most 512 characters")
    func traceState() {
        #expect(TraceContext.acceptableTraceState("a=1,b=2") == "a=1,b=2")
        #expect(TraceContext.acceptableTraceState(String(repeating: "a", count: 513)) == nil)
        #expect(TraceContext.acceptableTraceState("a=\u{1}") == nil)
        #expect(TraceContext.acceptableTraceState("") == nil)
    }

    @Test("a context made by hand keeps only an acceptable tracestate: the transports write it into a head as it is")
    func madeByHand() {
        let id = TraceContext.TraceID(high: 1, low: 2)
        for hostile in ["a=1\r\nX-Injected: 1", "a=\u{7F}", "a=é", String(repeating: "a", count: 513)] {
            let context = TraceContext(traceID: id, spanID: 3, parentSpanID: 4, sampled: true, traceState: hostile)
            #expect(context.traceState == nil, "\(hostile.debugDescription) kept")
        }
        #expect(TraceContext(traceID: id, spanID: 3, parentSpanID: 4, sampled: true, traceState: "a=1,b=2").traceState == "a=1,b=2")
    }
}

@Suite("RequestRecord: the spans of a sampled trace")
struct RequestRecordSpanTests {
    static let context = TraceContext(traceID: TraceContext.TraceID(high: 1, low: 2), spanID: 0x51, parentSpanID: nil, sampled: true, traceState: nil)

    @Test("a sampled record times its entries and notes its client spans; each a child of the server span, each outgoing request a span id of its own")
    func sampled() throws {
        let record = RequestRecord(trace: Self.context)
        #expect(record.traces, "decorators note what they do for a sampled trace")
        let place = record.place("auth_refresh")
        record.takeCachePlace()
        record.noteCacheStatus("veneer; fwd=miss; stored")
        let first = try #require(record.beginOutgoing()), second = try #require(record.beginOutgoing())
        #expect(first.spanID != second.spanID)
        #expect(first.recorded && second.recorded, "a sampled trace's outgoing requests are spans to end")
        #expect(first.traceparent == "00-00000000000000010000000000000002-" + TraceContext.hex(first.spanID) + "-01")
        record.endOutgoing(first, name: "GET", attributes: [("http.response.status_code", .int(401))], error: nil)
        record.endOutgoing(second, name: "GET", attributes: [("http.response.status_code", .int(200))], error: nil)
        record.append(.init(name: "auth_refresh", detail: "token 41s left, retried after 401"), at: place)
        record.append(.init(name: "fault", detail: "delay 1s", duration: .seconds(1)))
        let spans = record.childSpans
        #expect(spans.map(\.name) == ["auth_refresh", "fault", "cache", "GET", "GET"])
        #expect(spans.allSatisfy { $0.parentSpanID == 0x51 && $0.traceID == Self.context.traceID && $0.start <= $0.end })
        #expect(spans.map(\.kind) == [.internal, .internal, .internal, .client, .client])
        #expect(spans[1].end - spans[1].start == 1_000_000_000, "a note made once done began its duration ago")
        #expect(spans[2].attributes.contains { $0.key == "veneer.decision" && $0.value == .string("miss stored") })
        #expect(Set(spans.map(\.spanID)).count == 5)
    }

    @Test("unsampled: the context is passed on (flag 00) but nothing is timed or kept; without telemetry, nothing at all")
    func unsampled() {
        let context = TraceContext(traceID: Self.context.traceID, spanID: 0x51, parentSpanID: nil, sampled: false, traceState: nil)
        let record = RequestRecord(trace: context)
        #expect(!record.traces)
        let outgoing = record.beginOutgoing()
        #expect(outgoing?.traceparent.hasSuffix("-00") == true)
        #expect(outgoing?.recorded == false, "an unsampled one only passes the context on: its sender builds no span")
        if let outgoing { record.endOutgoing(outgoing, name: "GET", attributes: [], error: nil) }
        #expect(record.childSpans.isEmpty)
        #expect(RequestRecord().beginOutgoing() == nil)
    }
}

