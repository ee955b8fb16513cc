import Synchronization

/// What happened to one request inside the chain, owned by the server edge (one per
/// request, made with its ``ProxyRequest``) and never part of a response, so never stored.
///
/// Decorators note what they did: the cache its status, the origin its name and the time it
/// spent, any other decorator an ``Entry``. The edge reads the record once the request is
/// answered (for an access log, `Server-Timing`, the observer). The cache and the origin,
/// which act on nearly every request, have fields of their own, so that the record stays one
/// allocation.
///
/// What a decorator does on every request (the token it injected, the time it measured) is
/// worth noting only when someone reads it: the edge says so with ``trace(_:)`` (the
/// environment's `trace`, an access log at debug level), and decorators look at ``traces``
/// before they make any text. What happens rarely (a fault, a block, a refresh) is always noted.
public final class RequestRecord: Sendable {
    /// One decorator's note.
    public struct Entry: Sendable, Equatable {
        /// Who acted (`cache`, `upstream`, a decorator's name).
        public let name: String
        /// What it did, in a few words (empty when its time says it all).
        public let detail: String
        /// How long it took, if it measured that.
        public let duration: Duration?

        /// A note.
        public init(name: String, detail: String, duration: Duration? = nil) {
            self.name = name
            self.detail = detail
            self.duration = duration
        }

        /// Whether it says anything (a ``Place`` taken and never filled does not).
        var isEmpty: Bool { detail.isEmpty && duration == nil }
    }

    /// Who reads the notes of every request, beyond the access log's fields.
    public struct Tracing: OptionSet, Sendable {
        /// The raw bits.
        public let rawValue: UInt8
        /// Creates a set from its bits.
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        /// The answer carries `Server-Timing` (the environment's `trace: true`).
        public static let serverTiming = Tracing(rawValue: 1)
        /// The access log line carries the entries (debug level).
        public static let log = Tracing(rawValue: 2)
        /// Someone watches the status page (an open `/-/events` stream): it shows the entries.
        public static let watched = Tracing(rawValue: 4)
        /// The request's trace is sampled (`telemetry`): each entry becomes a span.
        public static let telemetry = Tracing(rawValue: 8)
    }

    /// A request of Veneer's own in the request's trace (an upstream attempt, a token
    /// endpoint call) under way: the span id its `traceparent` names, and when it began.
    public struct OutgoingSpan: Sendable {
        /// The trace fields to send with it (the transport writes them: ``OutboundRequest/trace``).
        public let trace: OutgoingTrace
        /// The span's id.
        public var spanID: UInt64 { trace.spanID }
        /// The `traceparent` to send with it (made on demand: an upstream attempt's transport
        /// writes it into the request's head instead).
        public var traceparent: String { trace.traceparent }
        /// When it began (nanoseconds since 1970).
        public let start: Int64
        /// Whether its trace is sampled: only then is it ended (``endOutgoing(_:name:attributes:error:)``);
        /// an unsampled one only passes the context on, and whoever sent it builds nothing more.
        public let recorded: Bool
    }

    /// Where a decorator's entry stands among the others, taken as the request passes it on
    /// the way in: a note made on the way back (a time, what the answer taught) keeps the
    /// chain's order, outermost first.
    public struct Place: Sendable {
        fileprivate let index: Int
    }

    private struct State {
        var route: String?
        var cacheStatus: String?
        /// The cache's status in a few words, when the cache said (else made from `cacheStatus`).
        var cacheSummary: String?
        /// How many entries stood before the (outermost) cache when it took its place.
        var cachePlace: Int?
        var originName: String?
        var originTime: Duration?
        var originExchanges = 0
        var entries: [Entry] = []
        /// For a sampled trace: when each entry's decorator took its place (or noted it), and
        /// when it noted it (nanoseconds since 1970), index for index with `entries`.
        var entryTimes: [(start: Int64, end: Int64)] = []
        /// For a sampled trace: when the cache took its place and noted its status.
        var cacheTimes: (start: Int64, end: Int64)?
        /// For a sampled trace: the spans of Veneer's own requests.
        var spans: [SpanNote] = []
        /// For a sampled trace: Veneer's own requests sent again as another span (``OutgoingTrace/resent()``).
        var resends: [(from: UInt64, to: UInt64, at: Int64)] = []
    }

    private let state = Mutex(State())
    private let tracingBits: Atomic<UInt8>
    /// The request's trace context, when its environment has `telemetry`.
    public let trace: TraceContext?
    /// Whether the trace is sampled: entries are timed and spans noted.
    private let timed: Bool

    /// An empty record, read by `tracing` (none: only what the access log needs is noted),
    /// in `trace` when the environment has `telemetry` (a sampled one adds ``Tracing/telemetry``).
    public init(tracing: Tracing = [], trace: TraceContext? = nil) {
        let sampled = trace?.sampled == true
        tracingBits = Atomic(sampled ? tracing.union(.telemetry).rawValue : tracing.rawValue)
        self.trace = trace
        timed = sampled
    }

    /// Who reads every note (see ``traces``).
    public var tracing: Tracing { Tracing(rawValue: tracingBits.load(ordering: .relaxed)) }

    /// Whether decorators note what they do on every request: someone reads it.
    @inline(__always)
    public var traces: Bool { tracingBits.load(ordering: .relaxed) != 0 }

    /// Adds readers of every note; the edge calls it before the chain sees the request.
    public func trace(_ more: Tracing) {
        tracingBits.bitwiseOr(more.rawValue, ordering: .relaxed)
    }

    /// Notes the route template the edge matched (for the access log and the edge's metrics).
    public func noteRoute(_ template: String) {
        state.withLock { $0.route = template }
    }

    /// The route template the edge matched, if the path named one.
    public var route: String? { state.withLock { $0.route } }

    /// Notes the cache's status for the request (the `Cache-Status` it answered with), and
    /// `summary`, ``cacheSummary(_:)`` of it, when the cache knows it without reading the
    /// status (a fresh hit: the status is not parsed per sampled hit); the last one noted
    /// counts (with two caches, the outer one's).
    public func noteCacheStatus(_ status: String, summary: String? = nil) {
        let now = timed ? SpanNote.now() : 0
        state.withLock { state in
            state.cacheStatus = status
            state.cacheSummary = summary
            if timed { state.cacheTimes = (state.cacheTimes?.start ?? now, now) }
        }
    }

    /// Takes the cache's place among the entries (see ``Place``); with two caches the outer
    /// one's counts, as its status does.
    public func takeCachePlace() {
        let now = timed ? SpanNote.now() : 0
        state.withLock { state in
            if state.cachePlace == nil { state.cachePlace = state.entries.count }
            if timed, state.cacheTimes == nil { state.cacheTimes = (now, now) }
        }
    }

    /// Notes the time one exchange with origin `name` took (a retried request asks it more
    /// than once: the times add up). An origin that measures no time (a replay) appends an
    /// ``Entry`` instead: the origin's is the innermost, so it comes last either way.
    public func noteOrigin(_ name: String, time: Duration) {
        state.withLock { state in
            state.originName = name
            state.originTime = (state.originTime ?? .zero) + time
            state.originExchanges += 1
        }
    }

    /// Takes a place among the entries for a note made later (see ``Place``).
    public func place(_ name: String) -> Place {
        let now = timed ? SpanNote.now() : 0
        return state.withLock { state in
            state.entries.append(Entry(name: name, detail: ""))
            if timed { state.entryTimes.append((now, now)) }
            return Place(index: state.entries.count - 1)
        }
    }

    /// Adds a decorator's note: at `place` if it took one on the way in, else after the others.
    public func append(_ entry: Entry, at place: Place? = nil) {
        let now = timed ? SpanNote.now() : 0
        state.withLock { state in
            if let place, place.index < state.entries.count {
                state.entries[place.index] = entry
                if timed, place.index < state.entryTimes.count { state.entryTimes[place.index].end = now }
            } else {
                state.entries.append(entry)
                // Noted once done: it began its duration ago.
                if timed { state.entryTimes.append((now - Self.nanoseconds(entry.duration ?? .zero), now)) }
            }
        }
    }

    // MARK: Telemetry

    /// Begins a request of Veneer's own in this request's trace (an upstream attempt, a token
    /// endpoint call): a new span id and the `traceparent` that names it. Nil without `telemetry`.
    public func beginOutgoing() -> OutgoingSpan? {
        guard let trace else { return nil }
        var ids = TraceIDGenerator()
        let spanID = TraceContext.newSpanID(&ids)
        return OutgoingSpan(trace: OutgoingTrace(context: trace, spanID: spanID, record: timed ? self : nil), start: timed ? SpanNote.now() : 0,
                            recorded: timed)
    }

    /// Notes that the request of span `from` was sent again as span `to` (a sampled trace's).
    func noteResend(from: UInt64, to: UInt64) {
        guard timed else { return }
        let now = SpanNote.now()
        state.withLock { $0.resends.append((from, to, now)) }
    }

    /// Ends `outgoing`, a client span named `name`: noted (for export) when the trace is
    /// sampled. A request the transport sent again (``OutgoingTrace/resent()``) is a span per
    /// attempt, each with `attributes` but the status code and an error for the attempts
    /// before the last.
    public func endOutgoing(_ outgoing: OutgoingSpan, name: String, attributes: [(key: String, value: SpanNote.Value)], error: String?) {
        guard timed, let trace else { return }
        let end = SpanNote.now()
        state.withLock { state in
            var spanID = outgoing.spanID, start = outgoing.start
            while let index = state.resends.firstIndex(where: { $0.from == spanID }) {
                let resend = state.resends.remove(at: index)
                state.spans.append(SpanNote(name: name, kind: .client, traceID: trace.traceID, spanID: spanID, parentSpanID: trace.spanID,
                                            start: start, end: resend.at, attributes: attributes.filter { $0.key != "http.response.status_code" },
                                            error: "closed before an answer: sent again"))
                spanID = resend.to
                start = resend.at
            }
            state.spans.append(SpanNote(name: name, kind: .client, traceID: trace.traceID, spanID: spanID, parentSpanID: trace.spanID,
                                        start: start, end: end, attributes: attributes, error: error))
        }
    }

    /// The spans of a sampled trace below its server span: one per decorator entry, in chain
    /// order, then the cache's (with its decision; its status is the server span's), then Veneer's own requests.
    /// Empty unless sampled. (What ``exportSpans(rootBound:to:_:)`` writes, as values.)
    public var childSpans: [SpanNote] {
        guard timed, let trace else { return [] }
        return state.withLock { state in
            var spans: [SpanNote] = []
            var ids = TraceIDGenerator()
            Self.forEachStep(&state, cacheSummary: Self.cacheSummary(of: state)) { name, times, decision in
                var attributes: [(key: String, value: SpanNote.Value)] = []
                if let decision { attributes.append(("veneer.decision", .string(decision))) }
                spans.append(SpanNote(name: name, kind: .internal, traceID: trace.traceID, spanID: TraceContext.newSpanID(&ids),
                                      parentSpanID: trace.spanID, start: times.start, end: max(times.end, times.start), attributes: attributes))
            }
            spans.append(contentsOf: state.spans)
            return spans
        }
    }

    /// Gives `sink` the spans of a sampled trace, written straight into its batch: the one
    /// `root` writes (the server span, or a background trace's root; at most `rootBound`
    /// bytes), then ``childSpans``, the same bytes without the values (no attribute array or
    /// ``SpanNote`` is made for a step; callgrind). Nothing unless sampled.
    package func exportSpans(rootBound: Int, to sink: any SpanSink, _ root: (inout SpanWriter) -> Void) {
        guard timed, let trace else { return }
        state.withLock { state in
            let summary = Self.cacheSummary(of: state)
            var count = 1 + state.spans.count
            var bound = rootBound
            for span in state.spans { bound += SpanWriter.bound(of: span) }
            Self.forEachStep(&state, cacheSummary: summary) { name, _, decision in
                count += 1
                // As SpanWriter.bound(of:) counts a SpanNote of these attributes.
                bound += SpanWriter.fixedBound + 6 + name.utf8.count
                if let decision { bound += 29 + 15 + decision.utf8.count }
            }
            sink.export(count: count, bound: bound) { writer in
                root(&writer)
                var ids = TraceIDGenerator()
                Self.forEachStep(&state, cacheSummary: summary) { name, times, decision in
                    writer.nested(2) { span in                                               // ScopeSpans.spans
                        span.head(traceID: trace.traceID, spanID: TraceContext.newSpanID(&ids), traceState: nil, parentSpanID: trace.spanID)
                        span.string(5, name)
                        span.times(kind: .internal, start: times.start, end: max(times.end, times.start))
                        if let decision { span.attribute("veneer.decision", decision) }
                    }
                }
                for span in state.spans { writer.span(span) }
            }
        }
    }

    /// The internal spans of `state`, in order: each decorator entry that says something (its
    /// detail the decision), then the cache's (its summary, `cacheSummary`, the decision unless
    /// empty; not its status, which the server span carries as `veneer.cache_status`).
    /// The cache's summary: the one it noted, else made from its status.
    private static func cacheSummary(of state: State) -> String? {
        state.cacheSummary ?? state.cacheStatus.map(cacheSummary)
    }

    /// (`state` in place: a copy of it retained and released each of its parts; callgrind.)
    private static func forEachStep(_ state: inout State, cacheSummary: String?,
                                    _ body: (_ name: String, _ times: (start: Int64, end: Int64), _ decision: String?) -> Void) {
        for (index, entry) in state.entries.enumerated() where !entry.isEmpty && index < state.entryTimes.count {
            body(entry.name, state.entryTimes[index], entry.detail.isEmpty ? nil : entry.detail)
        }
        if state.cacheStatus != nil, let times = state.cacheTimes {
            body("cache", times, cacheSummary.flatMap { $0.isEmpty ? nil : $0 })
        }
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        let parts = duration.components
        return parts.seconds * 1_000_000_000 + parts.attoseconds / 1_000_000_000
    }

    /// The cache's status, if a cache answered or passed the request on.
    public var cacheStatus: String? { state.withLock { $0.cacheStatus } }

    /// The time the origin spent, if the request reached it.
    public var originTime: Duration? { state.withLock { $0.originTime } }

    /// One entry per decorator that acted, in chain order (outermost first): the notes of the
    /// decorators, the cache's (its status in a few words, ``cacheSummary(_:)``) where it
    /// stands, and last the origin's, by its name (its time, and how many exchanges when more
    /// than one).
    public var entries: [Entry] {
        state.withLock { state in
            var entries: [Entry] = []
            entries.reserveCapacity(state.entries.count + 2)
            let cache = Self.cacheSummary(of: state).map { Entry(name: "cache", detail: $0) }
            // A cache that took no place (the record was not tracing then) comes first.
            let cachePlace = state.cachePlace ?? 0
            for (index, entry) in state.entries.enumerated() {
                if index == cachePlace, let cache { entries.append(cache) }
                if !entry.isEmpty { entries.append(entry) }
            }
            if let cache, cachePlace >= state.entries.count { entries.append(cache) }
            if let name = state.originName {
                let detail = state.originExchanges > 1 ? "\(state.originExchanges) exchanges" : ""
                entries.append(Entry(name: name, detail: detail, duration: state.originTime))
            }
            return entries
        }
    }
}
