import CoreMetrics
import Foundation
import HTTPTypes
import NIOCore
import Synchronization
import VeneerCore

/// `latency_log`: times everything inside it and writes one JSON line per request.
///
/// A line has the time, request id, method, route, path, status, duration, label and cache
/// status; never a body, a query, a token, `Authorization` or `Cookie`. Durations also go
/// to the `veneer_request_duration_seconds` histogram, by label, route and status.
public struct LatencyLogDecorator: ImmediateAnswering, CallbackAnswering {
    let inner: any Handler
    /// The inner handler's capabilities, looked up once: the fast paths pass through.
    let innerImmediate: (any ImmediateAnswering)?
    let innerCallback: (any CallbackAnswering)?
    let options: LatencyLogOptions
    let sink: any LogLineSink
    let clock: any VeneerClock
    let timers: TimerCache
    /// A line's time, its text up to the second made once a second.
    let time = LineTime()

    /// Wraps `inner`.
    public init(inner: any Handler, options: LatencyLogOptions, sink: any LogLineSink,
                clock: any VeneerClock, metrics: any MetricsFactory) {
        self.inner = inner
        innerImmediate = inner as? any ImmediateAnswering
        innerCallback = inner as? any CallbackAnswering
        self.options = options
        self.sink = sink
        self.clock = clock
        self.timers = TimerCache(label: options.label, factory: metrics)
    }

    /// It only passes its inner handler's immediate answers on.
    public var answersImmediately: Bool { false }

    /// Whether its inner handler can start without a task.
    public var startsWithoutTask: Bool { innerCallback?.startsWithoutTask ?? false }

    /// The inner handler's answer, timed and logged when it comes, also when it throws.
    public func answerImmediately(_ request: ProxyRequest) -> ImmediateAnswer {
        let start = clock.monotonic()
        let place = request.record.traces ? request.record.place("latency_log") : nil
        var rest: Deferred?
        if let innerImmediate {
            switch innerImmediate.answerImmediately(request) {
            case .answer(let response):
                record(request, .success(response), since: start, at: place)
                return .answer(response)
            case .later(let innerRest):
                rest = innerRest
            }
        }
        return .later(Deferred { [self, rest] in
            do {
                let response = if let rest { try await rest() } else { try await inner.handle(request) }
                record(request, .success(response), since: start, at: place)
                return response
            } catch {
                record(request, .failure(error), since: start, at: place)
                throw error
            }
        })
    }

    /// The inner handler's answer without a task, timed and logged when it comes.
    public func startAnswer(_ request: ProxyRequest, then done: @escaping @Sendable (Result<ProxyResponse, any Error>) -> Void) -> Bool {
        guard let innerCallback else { return false }
        let start = clock.monotonic()
        let place = request.record.traces ? request.record.place("latency_log") : nil
        return innerCallback.startAnswer(request) { [self] result in
            record(request, result, since: start, at: place)
            done(result)
        }
    }

    /// Logs how the inner handler answered: the one place every form of answering records.
    /// The time measured also goes into the request's record, at the `place` taken on the
    /// way in, when the record traces.
    func record(_ request: ProxyRequest, _ result: Result<ProxyResponse, any Error>, since start: Duration, at place: RequestRecord.Place?) {
        let elapsed = clock.monotonic() - start
        if place != nil { request.record.append(.init(name: "latency_log", detail: "", duration: elapsed), at: place) }
        switch result {
        case .success(let response):
            record(request, status: response.status.code, error: nil, cacheStatus: response.headers[.cacheStatus], elapsed: elapsed)
        case .failure(let error):
            let proxyError = error as? ProxyError ?? .internal
            record(request, status: proxyError.status.code, error: proxyError.code.rawValue, cacheStatus: nil, elapsed: elapsed)
        }
    }

    func record(_ request: ProxyRequest, status: Int, error: String?, cacheStatus: String?, elapsed: Duration) {
        let route = request.route, method = request.method.rawValue
        // The route's template and path are written from its pieces: making the two texts
        // cost a hit some 650 instructions (callgrind).
        timers.timer(route, method: method, status: status).record(elapsed)
        let requestID = request.requestID, label = options.label
        let trace = request.record.trace.flatMap { $0.sampled ? $0 : nil }
        let traceID = trace.map { $0.traceID.hex }, spanID = trace.map { TraceContext.hex($0.spanID) }
        // The line in one pass, its size reckoned first: written piece by piece, each piece
        // checked the buffer's capacity, and a line cost a hit some 13,000 instructions (callgrind).
        var length = 160 + Timestamp.iso8601Length + 20 + Timestamp.millisecondsLength
        length += ByteCursor.jsonQuotedLength(requestID) + ByteCursor.jsonQuotedLength(label) + (cacheStatus.map(ByteCursor.jsonQuotedLength) ?? 0)
        length += method.utf8.count + route.templateLength + route.pathLength + (traceID?.utf8.count ?? 0) + (spanID?.utf8.count ?? 0)
            + (error?.utf8.count ?? 0)
        let now = clock.now()
        let slow = options.slow.map { elapsed > $0 } ?? false
        // Written on the stack and copied by the sink (a file sink into its queue): a buffer
        // of its own per line cost an allocation and its release.
        withUnsafeTemporaryAllocation(byteCount: length, alignment: 1) { raw in
            var out = ByteCursor(raw, reserved: length)
            out.append("{\"time\":\"")
            time.append(now, to: &out)
            out.append("\",\"request_id\":")
            out.appendJSONQuoted(requestID)
            if let traceID, let spanID {
                // The request's server span (`telemetry`): the line joins its trace by these.
                out.append(",\"trace_id\":\"")
                out.append(traceID)
                out.append("\",\"span_id\":\"")
                out.append(spanID)
                out.append("\"")
            }
            out.append(",\"method\":\"")
            out.append(method)
            out.append("\",\"route\":\"")
            route.appendTemplate(to: &out)
            out.append("\",\"path\":\"")
            route.appendPath(to: &out)
            out.append("\",\"status\":")
            out.appendDecimal(status)
            out.append(",\"duration_ms\":")
            Timestamp.appendMilliseconds(elapsed, to: &out)
            out.append(",\"label\":")
            out.appendJSONQuoted(label)
            if let cacheStatus {
                out.append(",\"cache\":")
                out.appendJSONQuoted(cacheStatus)
            }
            if let error {
                out.append(",\"error\":\"")
                out.append(error)
                out.append("\"")
            }
            if slow { out.append(",\"slow\":true") }
            out.append("}\n")
            sink.write(bytes: UnsafeRawBufferPointer(rebasing: raw[..<out.offset]))
        }
    }
}

/// One histogram per route, method and status, created once and reused.
final class TimerCache: Sendable {
    private let label: String
    private let factory: any MetricsFactory
    /// What tells the histograms apart: no text is made per request to look one up.
    private struct Key: Hashable {
        /// The route's resource, and whether it names an item (`/name/{id}`) or the collection.
        let resource: String
        let item: Bool
        let method: String
        let status: Int
    }

    private struct Timers {
        var byKey: [Key: CoreMetrics.Timer] = [:]
        /// The one asked for last: requests are mostly alike, and comparing a key costs less
        /// than hashing it (a hit's line looked it up in the dictionary every time).
        var last: (key: Key, timer: CoreMetrics.Timer)?
    }

    private let timers = Mutex(Timers())

    init(label: String, factory: any MetricsFactory) {
        self.label = label
        self.factory = factory
    }

    func timer(_ route: ResourceRoute, method: String, status: Int) -> CoreMetrics.Timer {
        let key = Key(resource: route.resource.name, item: route.id != nil, method: method, status: status)
        let found: CoreMetrics.Timer? = timers.withLock { timers in
            if let last = timers.last, last.key == key { return last.timer }
            guard let timer = timers.byKey[key] else { return nil }
            timers.last = (key, timer)
            return timer
        }
        if let found { return found }
        let timer = CoreMetrics.Timer(label: "veneer_request_duration_seconds",
                          dimensions: [("label", label), ("method", method), ("route", route.template), ("status", String(status))],
                          factory: factory)
        timers.withLock { $0.byKey[key] = timer }
        return timer
    }
}

extension CoreMetrics.Timer {
    func record(_ duration: Duration) {
        let parts = duration.components
        recordNanoseconds(parts.seconds * 1_000_000_000 + parts.attoseconds / 1_000_000_000)
    }
}
