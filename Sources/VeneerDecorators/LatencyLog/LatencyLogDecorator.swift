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
        timers.timer(route: request.route.template, method: request.method.rawValue, status: status).record(elapsed)
        var line = ByteBuffer()
        line.reserveCapacity(256)
        line.writeStaticString("{\"time\":\"")
        Timestamp.writeISO8601(clock.now(), into: &line)
        line.writeStaticString("\",\"request_id\":")
        JSONText.writeQuoted(request.requestID, into: &line)
        if let trace = request.record.trace, trace.sampled {
            // The request's server span (`telemetry`): the line joins its trace by these.
            line.writeStaticString(",\"trace_id\":\"")
            line.writeString(trace.traceID.hex)
            line.writeStaticString("\",\"span_id\":\"")
            line.writeString(TraceContext.hex(trace.spanID))
            line.writeStaticString("\"")
        }
        line.writeStaticString(",\"method\":\"")
        line.writeString(request.method.rawValue)
        line.writeStaticString("\",\"route\":\"")
        line.writeString(request.route.template)
        line.writeStaticString("\",\"path\":\"")
        line.writeString(request.route.path)
        line.writeStaticString("\",\"status\":")
        line.writeString(String(status))
        line.writeStaticString(",\"duration_ms\":")
        Timestamp.writeMilliseconds(elapsed, into: &line)
        line.writeStaticString(",\"label\":")
        JSONText.writeQuoted(options.label, into: &line)
        if let cacheStatus {
            line.writeStaticString(",\"cache\":")
            JSONText.writeQuoted(cacheStatus, into: &line)
        }
        if let error {
            line.writeStaticString(",\"error\":\"")
            line.writeString(error)
            line.writeStaticString("\"")
        }
        if let slow = options.slow, elapsed > slow {
            line.writeStaticString(",\"slow\":true")
        }
        line.writeStaticString("}\n")
        sink.write(line)
    }
}

/// One histogram per route, method and status, created once and reused.
final class TimerCache: Sendable {
    private let label: String
    private let factory: any MetricsFactory
    /// What tells the histograms apart: no text is made per request to look one up.
    private struct Key: Hashable {
        let route: String
        let method: String
        let status: Int
    }

    private let timers = Mutex<[Key: CoreMetrics.Timer]>([:])

    init(label: String, factory: any MetricsFactory) {
        self.label = label
        self.factory = factory
    }

    func timer(route: String, method: String, status: Int) -> CoreMetrics.Timer {
        let key = Key(route: route, method: method, status: status)
        if let timer = timers.withLock({ $0[key] }) { return timer }
        let timer = CoreMetrics.Timer(label: "veneer_request_duration_seconds",
                          dimensions: [("label", label), ("method", method), ("route", route), ("status", String(status))],
                          factory: factory)
        timers.withLock { $0[key] = timer }
        return timer
    }
}

extension CoreMetrics.Timer {
    func record(_ duration: Duration) {
        let parts = duration.components
        recordNanoseconds(parts.seconds * 1_000_000_000 + parts.attoseconds / 1_000_000_000)
    }
}
