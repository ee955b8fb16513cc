import CoreMetrics
import HTTPTypes
import Logging
import NIOCore
import VeneerCore
import VeneerHTTP1

/// The bookkeeping of one connection's answers, kept apart from ``ProxyRequestHandler``
/// (which only feeds its state machine and writes bytes): every answer written is counted
/// (``EdgeMetrics``), the chain's answers are added to the status page's feed
/// (``RequestFeed``), and each gets its access log line (``AccessLog``) with what the chain
/// noted of it (its ``RequestRecord``), refusals included.
///
/// The handler tells it what happens, in the order it happens: a request handed to the edge
/// (``started(_:)``), its answer written or discarded (``written(_:_:bytesOut:now:)``,
/// ``discarded(_:_:now:)``), a streamed answer begun and ended (``streamStarted(_:)``,
/// ``streamEnded(_:bytesOut:)``), and what the connection answered without the edge: a
/// request that could not be read (``refused(_:route:_:bytesOut:now:)``) and the requests cut
/// when `drain_timeout` ran out (``cut(_:answeredWith:bytesOut:unanswered:)``).
///
/// One per connection, on its event loop; the sinks are shared by every connection.
struct AnswerObserver {
    /// Where the answers of every connection of a listener are reported.
    struct Sinks: Sendable {
        /// One line per answer, refusals included.
        let accessLog: AccessLog?
        /// The requests answered, refusals included, and those in flight.
        let metrics: EdgeMetrics?
        /// The chain's answers, for the status page.
        let feed: RequestFeed?
        /// The spans of sampled requests (`telemetry`), refusals included.
        var telemetry: (any SpanSink)? = nil
    }

    /// A request handed to the edge, until its answer is written.
    struct Exchange {
        let work: ProxyRequestHandler.Work
        let record: RequestRecord
        /// The id the edge gave it (nil for a request the edge never had).
        let requestID: String?
        /// For a request refused while its body arrived, or whose body streamed to the chain:
        /// the bytes of the body read.
        var bodyBytesRead: Int?

        /// Adds it to the status page's `feed`, answered with `response` at `now`.
        func add(to feed: RequestFeed, _ response: ProxyResponse, peer: PeerIdentity?, now: NIODeadline) {
            feed.add(answered: now, method: work.head.method, target: work.head.target, status: Int(response.status.code),
                     nanoseconds: (now - work.received).nanoseconds, headers: response.headers, record: record, peer: peer)
        }
    }

    private let sinks: Sinks
    /// Whether anything is reported at all (no record is made per request otherwise).
    private let observes: Bool
    private let client: ClientAddress?
    /// The sampler of `sinks.telemetry`, read once (not through the existential per request).
    private let sampler: TraceSampler?
    /// What this connection's server spans share (with `telemetry`).
    private var spanMemo: ServerSpan.Memo
    private let peer: PeerIdentity?
    /// The counter of this connection's caller's unit, once it has had an answer.
    private var unitCounter: Counter?
    private let logger: Logger
    /// The request being answered (one at a time).
    private var answering: Exchange?
    /// The request a streamed answer is being written for.
    private var streaming: Exchange?
    /// The counter of this connection's last answer, with what it counts (see ``EdgeMetrics/counter(route:method:status:)``).
    /// Kept as fields of their own rather than a tuple: comparing them in place copies nothing
    /// (a tuple read whole retained and released its two strings and the counter per answer).
    private var lastCounter: Counter?
    private var lastRoute: String?
    private var lastMethod: HTTPRequest.Method?
    private var lastStatus = -1

    init(_ sinks: Sinks, client: ClientAddress?, peer: PeerIdentity? = nil, logger: Logger) {
        self.peer = peer
        self.sinks = sinks
        observes = sinks.accessLog != nil || sinks.metrics != nil || sinks.feed != nil || sinks.telemetry != nil
        sampler = sinks.telemetry?.sampler
        spanMemo = ServerSpan.Memo(client: sampler == nil ? nil : client)
        self.client = client
        self.logger = logger
    }

    // MARK: Requests the edge answers

    /// `work` is handed to the edge: the record its chain notes in (tracing what the access
    /// log and an open status page read) and the id it is known by, which the edge then uses.
    /// Nil when nothing observes.
    @inline(__always)
    mutating func started(_ work: ProxyRequestHandler.Work) -> (record: RequestRecord, requestID: String)? {
        guard observes else { return nil }
        assert(answering == nil, "two requests answered at once")
        var tracing: RequestRecord.Tracing = sinks.accessLog?.writesTrace == true ? .log : []
        // While the status page is open, its rows say what each decorator did, trace or not.
        if let feed = sinks.feed, feed.watches > 0 { tracing.insert(.watched) }
        let record = RequestRecord(tracing: tracing, trace: sampler.map { ServerSpan.context(work.head.fields, sampler: $0) })
        // Known here too: a request cut at shutdown is logged by the id the chain knows it by.
        let requestID = ProxyEdge.requestID(work.head.fields)
        answering = Exchange(work: work, record: record, requestID: requestID)
        sinks.metrics?.started()
        return (record, requestID)
    }

    /// `bytes` more of the body of the request being answered were read (a body that streams
    /// to the chain while it is answered): counted in its access log line's bytes in.
    mutating func bodyRead(_ bytes: Int) {
        guard let read = answering.map({ $0.bodyBytesRead ?? 0 }) else { return }
        answering?.bodyBytesRead = read + bytes
    }

    /// The request being answered, taken as its answer is about to be written (or dropped).
    mutating func takeAnswering() -> Exchange? {
        defer { answering = nil }
        return answering
    }

    /// `response`, the answer to `exchange` (nil for a request nothing observed), was written: `bytesOut` bytes.
    mutating func written(_ exchange: Exchange?, _ response: ProxyResponse, bytesOut: Int, now: NIODeadline) {
        observe(exchange, response, bytesOut: bytesOut, now: now)
    }

    /// The answer to `exchange` was dropped: the client left. Logged with nothing sent.
    mutating func discarded(_ exchange: Exchange?, _ response: ProxyResponse, now: NIODeadline) {
        // None when it was logged already (cut at shutdown) or nothing observes.
        guard let exchange else { return }
        observe(exchange, response, bytesOut: 0, now: now)
    }

    // MARK: Streamed answers

    /// A streamed answer to `exchange` began: it leaves the in-flight gauge now (a status page
    /// left open is not a request waiting), and is counted and logged when it ends.
    mutating func streamStarted(_ exchange: Exchange?) {
        if exchange != nil { sinks.metrics?.finished() }
        streaming = exchange
    }

    /// The streamed answer ended, `bytesOut` bytes written in all: its line, with the stream's
    /// whole life as its duration (its status and head were known at the start, what it cost
    /// only now).
    mutating func streamEnded(_ head: ProxyResponse, bytesOut: Int) {
        let exchange = streaming
        streaming = nil
        observe(exchange, head, bytesOut: bytesOut, now: .now(), gauge: false)
    }

    // MARK: Answers without the edge

    /// The connection refused what it could not read as a request (400 malformed, 408), with
    /// `response`. A request refused once its head was read whole (`interrupted`: its body too
    /// slow, a bad chunk) is logged with its method, `route` and path, as any other; never
    /// counted in flight: the edge never had it.
    mutating func refused(_ interrupted: (head: HTTP1RequestParser.Head, bodyBytes: Int)?, route: (String) -> String?,
                          _ response: ProxyResponse, bytesOut: Int, now: NIODeadline) {
        guard observes else { return }
        let refused = interrupted.map { interrupted in
            Exchange(work: ProxyRequestHandler.Work(head: interrupted.head, body: .complete(ByteBuffer()), received: now),
                     record: RequestRecord(trace: sampler.map { ServerSpan.context(interrupted.head.fields, sampler: $0) }),
                     requestID: nil, bodyBytesRead: interrupted.bodyBytes)
        }
        if let refused, let route = route(refused.work.head.target) { refused.record.noteRoute(route) }
        observe(refused, response, bytesOut: bytesOut, now: now, gauge: false)
    }

    /// Graceful shutdown's wait ran out: `cut`, the request being answered (taken with
    /// ``takeAnswering()``), got `response` (503, unless the connection had already ended:
    /// nil), and the requests read behind it get no answer. Each goes to the daemon log, and
    /// the one answered to the access log.
    mutating func cut(_ cut: Exchange?, answeredWith response: ProxyResponse?, bytesOut: Int, unanswered: [ProxyRequestHandler.Work]) {
        if let response {
            logger.warning("drain_timeout ran out before the request was answered: answered 503 shutting_down, connection closed",
                           metadata: Self.describe(cut?.work.head, requestID: response.headers[.xRequestID]))
        }
        for work in unanswered {
            // Never handed to the edge: only the caller's own id, if it sent a reasonable one.
            let requestID = work.head.fields[.xRequestID].flatMap { RequestID.isAcceptable($0) ? $0 : nil }
            logger.warning("drain_timeout ran out before the request was answered: no answer, connection closed",
                           metadata: Self.describe(work.head, requestID: requestID))
        }
        if let cut, let response { observe(cut, response, bytesOut: bytesOut, now: .now()) }
    }

    /// A request in the daemon log: its method and path (never the query), and its id.
    static func describe(_ head: HTTP1RequestParser.Head?, requestID: String?) -> Logger.Metadata {
        var metadata: Logger.Metadata = [:]
        if let requestID { metadata["request_id"] = .string(requestID) }
        guard let head else { return metadata }
        metadata["method"] = .string(head.method.rawValue)
        let path = head.target.firstIndex(of: "?").map { String(head.target[..<$0]) } ?? head.target
        metadata["path"] = .string(String(path.prefix(512)))
        return metadata
    }

    // MARK: Reporting

    /// Counts an answer and queues its access log line: `exchange` is nil for a refusal of
    /// what could not be read as a request. `gauge`: it leaves the in-flight gauge now.
    private mutating func observe(_ exchange: Exchange?, _ response: ProxyResponse, bytesOut: Int, now: NIODeadline, gauge: Bool = true) {
        let route = exchange?.record.route
        // The admin API stays out of traces (README, Traces). Whether telemetry is on is read
        // from the sampler kept apart: the sink, an existential, is copied out only for a
        // sampled request (a copy for every request cost more than the sampling; callgrind).
        // An unsampled request is let go first, before the route is compared and without the
        // exchange bound (a copy of it, its head's strings retained and released; callgrind).
        if sampler != nil, exchange?.record.trace?.sampled != false, route != "/-/" {
            if let exchange {
                if let telemetry = sinks.telemetry {
                    ServerSpan.export(exchange.work.head, received: exchange.work.received, record: exchange.record, response,
                                      requestID: exchange.requestID, memo: &spanMemo, now: now, to: telemetry)
                }
            } else if let telemetry = sinks.telemetry {
                // What could not be read as a request: sampled as a new trace.
                ServerSpan.exportUnread(response, client: client, now: now, to: telemetry)
            }
        }
        if let metrics = sinks.metrics {
            if exchange != nil, gauge { metrics.finished() }
            let method = exchange?.work.head.method, status = Int(response.status.code)
            if lastStatus == status, lastRoute == route, lastMethod == method, let counter = lastCounter {
                counter.increment()
            } else {
                let counter = metrics.counter(route: route, method: method, status: status)
                (lastCounter, lastRoute, lastMethod, lastStatus) = (counter, route, method, status)
                counter.increment()
            }
            if let peer {
                let counter = unitCounter ?? metrics.unitCounter(peer.unit)
                unitCounter = counter
                counter.increment()
            }
        }
        if let feed = sinks.feed, route != "/-/" {
            // Through optional chaining, the exchange read in place: binding it (`let exchange`)
            // copied it whole, its parts retained and released, on every answer (callgrind).
            exchange?.add(to: feed, response, peer: peer, now: now)
        }
        guard let accessLog = sinks.accessLog else { return }
        var entry = AccessLogEntry(
            time: AccessLogEntry.now(), requestID: response.headers[.xRequestID], client: client, method: nil, route: nil, target: nil,
            protocolVersion: nil, status: Int(response.status.code), bytesIn: 0, bytesOut: bytesOut, duration: .zero, record: nil,
            userAgent: nil)
        entry.peer = peer
        if let exchange {
            let head = exchange.work.head
            entry.method = head.method
            entry.route = route
            entry.target = head.target
            entry.protocolVersion = head.minorVersion == 0 ? "1.0" : "1.1"
            if let read = exchange.bodyBytesRead {
                entry.bytesIn = head.size + read
            } else if case .complete(let body, _) = exchange.work.body {
                entry.bytesIn = head.size + body.readableBytes
            } else {
                entry.bytesIn = head.size
            }
            entry.duration = .nanoseconds((now - exchange.work.received).nanoseconds)
            entry.record = exchange.record
            entry.userAgent = head.fields[.userAgent]
        }
        accessLog.append(entry)
    }
}
