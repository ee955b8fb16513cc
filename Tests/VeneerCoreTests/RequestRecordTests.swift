import Testing
import VeneerCore

@Suite("Request records")
struct RequestRecordTests {
    @Test("one entry per decorator that acted: the cache's status in a few words, the others in order, the origin last by its name with its time over every exchange")
    func entries() {
        let record = RequestRecord()
        #expect(record.entries.isEmpty && record.cacheStatus == nil && record.originTime == nil && !record.traces)
        record.append(RequestRecord.Entry(name: "auth_refresh", detail: "refreshed", duration: .milliseconds(3)))
        record.noteOrigin("upstream", time: .milliseconds(5))
        record.noteCacheStatus("veneer; fwd=uri-miss")
        record.noteOrigin("upstream", time: .milliseconds(2))
        record.noteCacheStatus("veneer; fwd=uri-miss; fwd-status=200; stored")
        record.append(RequestRecord.Entry(name: "block_list", detail: "learned block"))
        #expect(record.cacheStatus == "veneer; fwd=uri-miss; fwd-status=200; stored" && record.originTime == .milliseconds(7))
        #expect(record.entries == [
            RequestRecord.Entry(name: "cache", detail: "miss stored"),
            RequestRecord.Entry(name: "auth_refresh", detail: "refreshed", duration: .milliseconds(3)),
            RequestRecord.Entry(name: "block_list", detail: "learned block"),
            RequestRecord.Entry(name: "upstream", detail: "2 exchanges", duration: .milliseconds(7)),
        ])
    }

    @Test("places taken on the way in keep the chain's order for notes made on the way back; a place never filled says nothing")
    func places() {
        let record = RequestRecord(tracing: .serverTiming)
        #expect(record.traces && record.tracing == .serverTiming)
        // latency_log -> cache -> fault -> block_list -> record -> replay: each as a chain would note.
        let latency = record.place("latency_log")
        record.takeCachePlace()
        record.append(.init(name: "fault", detail: "delay 10ms", duration: .milliseconds(10)))
        let block = record.place("block_list")
        _ = record.place("record")
        record.append(.init(name: "replay", detail: "hit"))
        record.noteCacheStatus("veneer; fwd=uri-miss; fwd-status=200; stored")
        record.append(.init(name: "block_list", detail: "learned block"), at: block)
        record.takeCachePlace()
        record.append(.init(name: "latency_log", detail: "", duration: .milliseconds(12)), at: latency)
        #expect(record.entries == [
            .init(name: "latency_log", detail: "", duration: .milliseconds(12)),
            .init(name: "cache", detail: "miss stored"),
            .init(name: "fault", detail: "delay 10ms", duration: .milliseconds(10)),
            .init(name: "block_list", detail: "learned block"),
            .init(name: "replay", detail: "hit"),
        ])
        let later = RequestRecord()
        later.trace(.log)
        #expect(later.traces && later.tracing == .log)
    }

    @Test("the cache's status in a few words")
    func cacheSummary() {
        let cases: [(String, String)] = [
            ("veneer; hit; ttl=29", "hit"),
            ("veneer; hit; ttl=-3; detail=stale-while-revalidate", "stale, revalidating"),
            ("veneer; fwd=stale; fwd-status=503; ttl=-10; detail=stale-if-error", "stale if error 503"),
            ("veneer; fwd=uri-miss; collapsed", "collapsed"),
            ("veneer; fwd=stale; fwd-status=304", "revalidated"),
            ("veneer; fwd=uri-miss; fwd-status=200; stored", "miss stored"),
            ("veneer; fwd=vary-miss; fwd-status=200", "miss"),
            ("veneer; fwd=stale; fwd-status=200; stored", "expired stored"),
            ("veneer; fwd=request; stored", "passed stored"),
            ("veneer; fwd=bypass; detail=request-body", "bypass"),
            ("veneer; fwd=partial; fwd-status=206", "partial"),
            ("something else", "something else"),
            // Read byte by byte: tabs and spaces around members, empty members.
            ("veneer;;\tfwd=miss \t;  stored;", "miss stored"),
            ("veneer;hit", "hit"),
        ]
        for (status, summary) in cases {
            #expect(RequestRecord.cacheSummary(status) == summary, "\(status)")
        }
    }

    @Test("copies of a request share its record")
    func shared() {
        let request = ProxyRequest(method: .get, route: .item(.posts, "1"))
        var copy = request
        copy.method = .head
        copy.record.noteCacheStatus("veneer; hit")
        #expect(request.record.cacheStatus == "veneer; hit")
    }

    @Test("a request sent again (the transport's resend) is a client span per attempt: new ids in its traceparent, the earlier attempts ended with an error and without a status code, all under the server span")
    func resentAttempts() throws {
        var ids = TraceIDGenerator()
        let context = TraceContext.start(traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", tracestate: nil,
                                         sampler: TraceSampler(ratio: 1), ids: &ids)
        let record = RequestRecord(trace: context)
        let span = try #require(record.beginOutgoing())
        let second = span.trace.resent()
        let third = second.resent()
        #expect(Set([span.spanID, second.spanID, third.spanID]).count == 3)
        #expect(third.traceparent.hasPrefix("00-4bf92f3577b34da6a3ce929d0e0e4736-") && third.traceparent.hasSuffix("-01"))
        record.endOutgoing(span, name: "GET", attributes: [("server.address", .string("a")), ("http.response.status_code", .int(200))], error: nil)
        let spans = record.childSpans
        #expect(spans.map(\.spanID) == [span.spanID, second.spanID, third.spanID])
        #expect(spans.allSatisfy { $0.kind == .client && $0.parentSpanID == context.spanID && $0.traceID == context.traceID })
        #expect(spans.map { $0.error != nil } == [true, true, false])
        #expect(spans.map { $0.attributes.count } == [1, 1, 2], "the status code is the last attempt's")
        #expect(zip(spans, spans.dropFirst()).allSatisfy { $0.end == $1.start && $0.start <= $0.end })

        // Unsampled: a new id all the same, nothing noted.
        let unsampled = RequestRecord(trace: TraceContext(traceID: context.traceID, spanID: 7, parentSpanID: nil, sampled: false, traceState: nil))
        let quiet = try #require(unsampled.beginOutgoing())
        let again = quiet.trace.resent()
        #expect(again.spanID != quiet.spanID && again.traceparent.hasSuffix("-00"))
        unsampled.endOutgoing(quiet, name: "GET", attributes: [], error: nil)
        #expect(unsampled.childSpans.isEmpty)
    }
}
