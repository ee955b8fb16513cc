import CoreMetrics
import HTTPTypes
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization
import VeneerConfig
import VeneerCore

/// The environment's span exporter (`telemetry:`): takes the spans of each sampled request
/// without waiting (``export(count:bound:_:)``), and posts them in batches to the collector
/// (OTLP/HTTP, protobuf), one request at a time, from a service of its own.
///
/// Memory is bounded by `queue` spans and one batch in flight: spans that do not fit, and
/// those of an export that failed or took longer than `timeout`, are dropped and counted
/// (`veneer_telemetry_spans_dropped_total` by reason: `queue_full`, `export_failed`,
/// `timeout`), never waited for. An event loop never blocks here: it takes a lock to encode
/// a request's spans into the batch being filled.
///
/// Spans are encoded as they are queued, on the thread that gives them (a connection's event
/// loop), written straight from the request's record into the batch being filled (``SpanWriter``),
/// and the queue holds batches of bytes: what crosses to the exporter's task is one buffer per
/// batch. (Queued as values and encoded on the exporter's side, every string and array of a
/// span was allocated by one thread and freed by another: malloc's per-thread caches then miss
/// on both sides, a cost perf shows spread over every allocation of the process.)
final class OTLPExporter: SpanSink, Service, CustomStringConvertible {
    /// Spans per request to the collector, at most (and at most half the queue: ``limit``).
    static let batch = 512
    /// How often a partial batch goes out.
    static let interval: Duration = .seconds(1)
    /// How often the batch being filled goes out (``interval``; tests set another).
    let interval: Duration

    let sampler: TraceSampler
    private let spec: TelemetrySpec
    private let transport: any HTTPTransport
    private let headers: HTTPFields
    private let logger: Logger
    private let queue: Mutex<Queue>
    /// The spans a batch holds before it goes out: ``batch``, or half the queue if that is
    /// smaller (so that a full batch leaves room to fill the next one while it is sent).
    let limit: Int
    private let envelope: OTLPTraceEncoder.Envelope
    private let wakeups: AsyncStream<Void>
    private let wake: AsyncStream<Void>.Continuation
    private let droppedFull: Counter
    private let droppedFailed: Counter
    private let droppedTimeout: Counter
    private let exported: Counter

    /// Encoded spans of whole requests, at most ``batch`` of them, with room for the envelope's head.
    private struct Batch {
        var bytes: ByteBuffer
        var spans: Int
    }

    private struct Queue {
        /// Batches filled, oldest first.
        var full = CircularBuffer<Batch>()
        /// The batch being filled.
        var filling: Batch?
        /// How many spans `full` and `filling` hold.
        var count = 0
        /// The size a new batch is allocated at (not grown by copies as spans come): that of
        /// the batches sent lately, following a larger one at once and a smaller one by a
        /// quarter per batch (one burst of large spans does not fix it for good), 16 KB at least.
        var lastSize = 16 << 10
        /// The buffer of the last batch sent, kept for the next one (a batch is tens of
        /// kilobytes: allocated for each and freed by another thread, malloc gave its pages
        /// back and faulted them in again, 2.5% of a hit's CPU at 100% sampling; perf).
        var spare: ByteBuffer?
        /// Whether a wakeup for a full batch is pending.
        var signalled = false
        /// Whether the exporter's timer asked for the batch being filled, full or not.
        var flushDue = false
        /// Whether the last export failed (logged once until one succeeds).
        var failing = false
    }

    var description: String { "the OTLP span exporter to \(spec.endpoint)" }

    /// An exporter to `spec`'s endpoint through `transport`, with `headers` (from `headers_file`
    /// and the variables), counting in `factory`; the batch being filled goes out every `interval`.
    init(spec: TelemetrySpec, headers: [String: String], transport: any HTTPTransport, factory: any MetricsFactory, logger: Logger,
         interval: Duration = OTLPExporter.interval) {
        self.spec = spec
        self.interval = interval
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
        limit = min(Self.batch, max(1, spec.queue / 2))
        envelope = OTLPTraceEncoder.Envelope(service: spec.serviceName)
        (wakeups, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        droppedFull = Counter(label: "veneer_telemetry_spans_dropped_total", dimensions: [("reason", "queue_full")], factory: factory)
        droppedFailed = Counter(label: "veneer_telemetry_spans_dropped_total", dimensions: [("reason", "export_failed")], factory: factory)
        droppedTimeout = Counter(label: "veneer_telemetry_spans_dropped_total", dimensions: [("reason", "timeout")], factory: factory)
        exported = Counter(label: "veneer_telemetry_spans_exported_total", factory: factory)
    }

    /// Queues the spans of one request, `count` of at most `bound` bytes that `write` writes
    /// into the batch being filled, or drops and counts them if they do not fit.
    func export(count: Int, bound: Int, _ write: (inout SpanWriter) -> Void) {
        guard count > 0 else { return }
        let capacity = spec.queue, limit = limit
        let (accepted, signal) = queue.withLock { queue -> (Bool, Bool) in
            guard queue.count + count <= capacity else { return (false, false) }
            var closed = false
            if let spans = queue.filling?.spans, spans + count > limit {
                // A request's spans stay together: this one starts the next batch.
                queue.full.append(queue.filling.take()!)
                closed = true
            }
            if queue.filling == nil {
                var spare = queue.spare
                queue.spare = nil
                queue.filling = Batch(bytes: envelope.batch(reusing: &spare, capacity: max(queue.lastSize, bound)), spans: 0)
            }
            OTLPTraceEncoder.append(bound: bound, to: &queue.filling!.bytes, write)
            queue.filling!.spans += count
            queue.count += count
            if queue.filling!.spans >= limit {
                // Full: it goes out at once (not with the next request, which may be long in coming).
                queue.full.append(queue.filling.take()!)
                closed = true
            }
            guard closed, !queue.signalled else { return (true, false) }
            queue.signalled = true
            return (true, true)
        }
        if !accepted { droppedFull.increment(by: Int64(count)) }
        if signal { wake.yield() }
    }

    /// Posts batches as they fill, and the one being filled every second, until graceful
    /// shutdown; then what is queued, once.
    ///
    /// Only full batches go out between two ticks of the timer: sending the batch being filled
    /// as soon as the last request returned (what the exporter once did) sent a request to the
    /// collector per round trip, a few dozen spans each at 10% sampling, and each request's
    /// fixed cost (its head, its system calls, the tasks and the event loop woken) was a
    /// percent of a hit's CPU.
    func run() async {
        await withDiscardingTaskGroup { group in
            group.addTask { [self] in
                while (try? await Task.sleep(for: interval)) != nil {
                    queue.withLock { $0.flushDue = true }
                    wake.yield()
                }
            }
            for await _ in wakeups.cancelOnGracefulShutdown() {
                await drain(partial: false)
            }
            group.cancelAll()
        }
        await drain()
    }

    /// Sends what is queued, a batch at a time (whole requests' spans, at most ``limit`` but
    /// for a request of more): the full batches, and the one being filled when `partial` or
    /// when the timer asked for it since.
    func drain(partial: Bool = true) async {
        while true {
            let next = queue.withLock { queue -> Batch? in
                var batch: Batch
                if let first = queue.full.popFirst() {
                    batch = first
                } else {
                    // Nothing full left: a batch that fills from now on wakes the exporter again.
                    queue.signalled = false
                    let due = partial || queue.flushDue
                    queue.flushDue = false
                    guard due, let filling = queue.filling else { return nil }
                    batch = filling
                    queue.filling = nil
                }
                queue.count -= batch.spans
                queue.lastSize = max(16 << 10, batch.bytes.readableBytes, queue.lastSize - queue.lastSize / 4)
                // Its head written here, where the batch is held once (held twice, the first
                // write copied it whole: callgrind).
                envelope.close(&batch.bytes)
                return batch
            }
            guard let next else { return }
            await send(next.bytes, count: next.spans)
            queue.withLock { queue in
                // Kept unless far larger than batches are now (its capacity is what is kept).
                queue.spare = next.bytes.capacity <= 2 * queue.lastSize ? next.bytes : nil
            }
            if Task.isCancelled { return }
        }
    }

    private func send(_ body: ByteBuffer, count: Int) async {
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
