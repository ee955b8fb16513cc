#if canImport(Glibc)
@preconcurrency import Glibc
#endif

/// One finished span of a sampled request, as Veneer exports it (OTLP): made by the edge
/// from a request's ``RequestRecord`` (its server span and a child per decorator that acted)
/// and by whoever made a request of its own in the trace (an upstream attempt, a token
/// endpoint call: client spans noted in the record).
public struct SpanNote: Sendable {
    /// OTLP's span kinds (their numbers on the wire).
    public enum Kind: UInt8, Sendable {
        /// A step inside Veneer (a decorator).
        case `internal` = 1
        /// The request Veneer answers.
        case server = 2
        /// A request Veneer makes.
        case client = 3
    }

    /// An attribute's value.
    public enum Value: Sendable, Equatable {
        /// A string.
        case string(String)
        /// An integer.
        case int(Int64)
        /// A boolean.
        case bool(Bool)
    }

    /// The span's name (`GET /posts/{id}`, `cache`, `upstream`).
    public var name: String
    /// Its kind.
    public var kind: Kind
    /// The trace it belongs to.
    public var traceID: TraceContext.TraceID
    /// Its id.
    public var spanID: UInt64
    /// Its parent's id; nil for a root span.
    public var parentSpanID: UInt64?
    /// When it began, in nanoseconds since 1970.
    public var start: Int64
    /// When it ended, in nanoseconds since 1970.
    public var end: Int64
    /// Its attributes (semantic conventions' names where they define one).
    public var attributes: [(key: String, value: Value)]
    /// Why it failed, if it did (the span's status is then an error with this message).
    public var error: String?
    /// The caller's `tracestate` (the server span only).
    public var traceState: String?

    /// A span.
    public init(name: String, kind: Kind, traceID: TraceContext.TraceID, spanID: UInt64, parentSpanID: UInt64?, start: Int64, end: Int64,
                attributes: [(key: String, value: Value)] = [], error: String? = nil, traceState: String? = nil) {
        self.name = name
        self.kind = kind
        self.traceID = traceID
        self.spanID = spanID
        self.parentSpanID = parentSpanID
        self.start = start
        self.end = end
        self.attributes = attributes
        self.error = error
        self.traceState = traceState
    }

    /// The wall clock now, in nanoseconds since 1970 (what ``start`` and ``end`` hold).
    public static func now() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec)
    }
}

/// Where finished spans go: the environment's exporter (`telemetry:`). Never blocks: a span
/// that does not fit its bounded queue is dropped and counted.
public protocol SpanSink: Sendable {
    /// Which traces are recorded.
    var sampler: TraceSampler { get }
    /// Takes the spans of one request: `count` spans of at most `bound` bytes in all, which
    /// `write` writes (Veneer's own modules: ``SpanWriter`` is theirs) where the sink keeps them.
    func export(count: Int, bound: Int, _ write: (inout SpanWriter) -> Void)
}

extension SpanSink {
    /// Takes `spans`, the spans of one request.
    public func export(_ spans: [SpanNote]) {
        guard !spans.isEmpty else { return }
        var bound = 0
        for span in spans { bound += SpanWriter.bound(of: span) }
        export(count: spans.count, bound: bound) { writer in
            for span in spans { writer.span(span) }
        }
    }
}

/// Work of Veneer's own that no request waits for: a trace of its own, sampled as a new trace
/// is (a token refresh ahead of expiry), or a part of the trace of the request that started
/// it (a cache's background refresh); its root is an internal span around the work, and what
/// the work notes in ``record`` (an upstream request, a token endpoint call, each with its
/// `traceparent`) are its children.
public struct BackgroundTrace: Sendable {
    /// Where the work notes its requests (``RequestRecord/beginOutgoing()``).
    public let record: RequestRecord
    private let name: String
    private let start: Int64
    private let sink: (any SpanSink)?

    /// Begins the root span `name` of a new trace, its spans to go to `sink`.
    public init(_ name: String, to sink: any SpanSink) {
        var ids = TraceIDGenerator()
        self.init(name, trace: TraceContext.start(traceparent: nil, tracestate: nil, sampler: sink.sampler, ids: &ids), to: sink)
    }

    /// Begins the root span `name` as a child of `parent`'s span (the server span of the
    /// request that started the work), in its trace and sampled as it is; its spans go to
    /// `sink` (none: the work's requests only carry the trace on).
    public init(_ name: String, continuing parent: TraceContext, to sink: (any SpanSink)?) {
        var ids = TraceIDGenerator()
        self.init(name, trace: TraceContext(traceID: parent.traceID, spanID: TraceContext.newSpanID(&ids), parentSpanID: parent.spanID,
                                            sampled: parent.sampled, traceState: parent.traceState), to: sink)
    }

    private init(_ name: String, trace: TraceContext, to sink: (any SpanSink)?) {
        record = RequestRecord(trace: trace)
        self.name = name
        self.sink = sink
        start = SpanNote.now()
    }

    /// Ends the work (`error`: why it failed): its spans are exported if the trace is sampled.
    public func end(error: String? = nil) {
        guard let sink, let trace = record.trace, trace.sampled else { return }
        let root = SpanNote(name: name, kind: .internal, traceID: trace.traceID, spanID: trace.spanID, parentSpanID: trace.parentSpanID,
                            start: start, end: SpanNote.now(), error: error)
        record.exportSpans(rootBound: SpanWriter.bound(of: root), to: sink) { $0.span(root) }
    }
}
