import CoreMetrics
import HTTPTypes
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization
import VeneerConfig
import VeneerCore

/// The environment's span exporter (`telemetry:`): takes the spans of each sampled request
/// without waiting (``export(_:)``), and posts them in batches to the collector (OTLP/HTTP,
/// protobuf), one request at a time, from a service of its own.
///
/// Memory is bounded by `queue` spans and one batch in flight: spans that do not fit, and
/// those of an export that failed or took longer than `timeout`, are dropped and counted
/// (`veneer_telemetry_spans_dropped_total` by reason: `queue_full`, `export_failed`,
/// `timeout`), never waited for. An event loop never blocks
/// here: ``export(_:)`` takes a lock for an append.
final class OTLPExporter: SpanSink, Service, CustomStringConvertible {
    /// Spans per request to the collector.
    static let batch = 512
    /// How often a partial batch goes out.
    static let interval: Duration = .seconds(1)

    let sampler: TraceSampler
    private let spec: TelemetrySpec
    private let transport: any HTTPTransport
    private let headers: HTTPFields
    private let logger: Logger
    private let queue: Mutex<Queue>
    private let wakeups: AsyncStream<Void>
    private let wake: AsyncStream<Void>.Continuation
    private let droppedFull: Counter
    private let droppedFailed: Counter
    private let droppedTimeout: Counter
    private let exported: Counter

    private struct Queue {
        /// The spans of each request, as it gave them: queued and sent without a span copied.
        var requests = CircularBuffer<[SpanNote]>()
        /// How many spans `requests` holds.
        var count = 0
        /// Whether a wakeup for a full batch is pending.
        var signalled = false
        /// Whether the last export failed (logged once until one succeeds).
        var failing = false
    }

    var description: String { "the OTLP span exporter to \(spec.endpoint)" }

    /// An exporter to `spec`'s endpoint through `transport`, with `headers` (from `headers_file`
    /// and the variables), counting in `factory`.
    init(spec: TelemetrySpec, headers: [String: String], transport: any HTTPTransport, factory: any MetricsFactory, logger: Logger) {
        self.spec = spec
        sampler = spec.sampler
        self.transport = transport
        self.logger = logger
        var fields: HTTPFields = [.contentType: "application/x-protobuf"]
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) {
            guard let name = HTTPField.Name(name) else { continue }
            fields[name] = value
        }
        self.headers = fields
        queue = Mutex(Queue())
        (wakeups, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        droppedFull = Counter(label: "veneer_telemetry_spans_dropped_total", dimensions: [("reason", "queue_full")], factory: factory)
        droppedFailed = Counter(label: "veneer_telemetry_spans_dropped_total", dimensions: [("reason", "export_failed")], factory: factory)
        droppedTimeout = Counter(label: "veneer_telemetry_spans_dropped_total", dimensions: [("reason", "timeout")], factory: factory)
        exported = Counter(label: "veneer_telemetry_spans_exported_total", factory: factory)
    }

    /// Queues the spans of one request, or drops and counts them if they do not fit.
    func export(_ spans: [SpanNote]) {
        guard !spans.isEmpty else { return }
        let capacity = spec.queue
        let (accepted, signal) = queue.withLock { queue -> (Bool, Bool) in
            guard queue.count + spans.count <= capacity else { return (false, false) }
            queue.requests.append(spans)
            queue.count += spans.count
            guard queue.count >= Self.batch, !queue.signalled else { return (true, false) }
            queue.signalled = true
            return (true, true)
        }
        if !accepted { droppedFull.increment(by: Int64(spans.count)) }
        if signal { wake.yield() }
    }

    /// Posts batches as they fill, and partial ones every second, until graceful shutdown;
    /// then what is queued, once.
    func run() async {
        await withDiscardingTaskGroup { group in
            group.addTask { [wake] in
                while (try? await Task.sleep(for: Self.interval)) != nil { wake.yield() }
            }
            for await _ in wakeups.cancelOnGracefulShutdown() {
                await drain()
            }
            group.cancelAll()
        }
        await drain()
    }

    /// Sends what is queued, a batch at a time (whole requests' spans, at most ``batch``).
    func drain() async {
        while true {
            let (batch, count) = queue.withLock { queue -> ([[SpanNote]], Int) in
                var taken: [[SpanNote]] = []
                var count = 0
                while let first = queue.requests.first, taken.isEmpty || count + first.count <= Self.batch {
                    taken.append(queue.requests.removeFirst())
                    count += first.count
                }
                queue.count -= count
                if queue.count < Self.batch { queue.signalled = false }
                return (taken, count)
            }
            guard count > 0 else { return }
            await send(batch.joined(), count: count)
            if Task.isCancelled { return }
        }
    }

    private func send(_ batch: FlattenSequence<[[SpanNote]]>, count: Int) async {
        let body = OTLPTraceEncoder.encode(batch, service: spec.serviceName)
        let request = OutboundRequest(method: .post, endpoint: Endpoint(scheme: spec.endpoint.scheme, host: spec.endpoint.host,
                                                                        port: spec.endpoint.port, basePath: ""),
                                      target: spec.endpoint.basePath.isEmpty ? "/" : spec.endpoint.basePath, headers: headers,
                                      body: body, timeout: spec.timeout, maxResponseBodySize: 64 << 10)
        var problem: String?
        var timedOut = false
        do {
            let response = try await transport.send(request)
            if !(200..<300).contains(response.status.code) { problem = "HTTP \(response.status.code)" }
        } catch let error as ProxyError {
            // Connecting or the whole exchange took longer than its deadline.
            timedOut = error.code == .upstreamTimeout
            problem = error.detail ?? error.message
        } catch {
            problem = ErrorText.describe(error)
        }
        let logNow = queue.withLock { queue -> Bool in
            defer { queue.failing = problem != nil }
            return queue.failing != (problem != nil)
        }
        if let problem {
            (timedOut ? droppedTimeout : droppedFailed).increment(by: Int64(count))
            if logNow {
                logger.warning("the telemetry collector did not take a batch of spans: they are dropped (and counted) until it does",
                               metadata: ["endpoint": .string(spec.endpoint.description), "reason": .string(problem)])
            }
        } else {
            exported.increment(by: Int64(count))
            if logNow { logger.notice("the telemetry collector takes spans again", metadata: ["endpoint": .string(spec.endpoint.description)]) }
        }
    }
}
