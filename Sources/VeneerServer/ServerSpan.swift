import HTTPTypes
import NIOCore
import VeneerCore
import VeneerHTTP1

/// The server span of a request (`telemetry`): made from what the connection saw of it and
/// what its ``RequestRecord`` noted, once its answer is written, with the HTTP semantic
/// conventions' attributes; Veneer's own refusals carry their reason (`veneer.refusal`, the
/// error code of their body) and are errors.
enum ServerSpan {
    /// The trace context of a request that came with `fields` (its `tracestate` looked for
    /// only with a `traceparent`: without one it is dropped anyway).
    static func context(_ fields: HTTPFields, sampler: TraceSampler) -> TraceContext {
        var ids = TraceIDGenerator()
        let parent: String? = fields[.traceparent]
        let state: String? = parent == nil ? nil : fields[.tracestate]
        return TraceContext.start(traceparent: parent, tracestate: state, sampler: sampler, ids: &ids)
    }

    /// What a server span says, the request's own strings (no attribute array is made):
    /// written straight into the sink's batch by ``write(into:)``, the bytes a ``SpanNote`` of
    /// the same attributes would be.
    struct Fields {
        var trace: TraceContext
        var start: Int64
        var end: Int64
        /// Nil for what could not be read as a request (the span is then named `HTTP`).
        var method: String?
        var route: String?
        var path: Substring = ""
        var host: String?
        var port: Int?
        var minorVersion = 1
        var userAgent: String?
        var status: Int
        var client: String?
        var requestID: String?
        var cacheStatus: String?
        var refusal: String?
        var error: String?

        /// The longest attribute key written (`http.response.status_code`) at most.
        private static let keyBound = 32

        /// At most how many bytes ``write(into:)`` writes (``SpanWriter/bound(of:)``'s
        /// arithmetic, each of the 13 attributes counted with the longest key).
        var bound: Int {
            func size(_ text: String?) -> Int { text?.utf8.count ?? 0 }
            // The name (`HTTP`, or the method and route with a space), then the values.
            var total = SpanWriter.fixedBound + 6 + 4 + 2 * size(method) + 1 + 2 * size(route) + path.utf8.count
            total += 13 * (29 + Self.keyBound) + 4 + 3                                       // url.scheme, network.protocol.version
            total += size(host) + size(userAgent) + size(client) + size(requestID) + size(cacheStatus) + size(refusal)
            if let state = trace.traceState { total += 6 + state.utf8.count }
            if let error { total += 14 + error.utf8.count }
            return total
        }

        /// Adds what the request says (the HTTP semantic conventions' attributes), `received`
        /// when its head was read and `now` when its answer was written.
        mutating func add(_ head: HTTP1RequestParser.Head, received: NIODeadline, record: RequestRecord, now: NIODeadline) {
            start = end - (now - received).nanoseconds
            method = head.method.rawValue
            route = record.route
            // The path without its query, found on the bytes (the generic `pathWithoutQuery`
            // walked the string's indices; callgrind), counted in bytes first: `prefix` walks characters.
            var target = head.target
            let pathBytes = target.withUTF8 { bytes in bytes.firstIndex(of: UInt8(ascii: "?")) ?? bytes.count }
            let path = target.utf8.count == pathBytes ? target[...] : Substring(target.utf8.prefix(pathBytes))
            self.path = pathBytes <= AccessLogEntry.maxPath ? path : path.prefix(AccessLogEntry.maxPath)
            if let authority = head.authority { (host, port) = ServerSpan.hostAndPort(authority) }
            minorVersion = head.minorVersion
            if let agent = head.fields[.userAgent] { userAgent = AccessLogEntry.trimmed(agent, to: AccessLogEntry.maxUserAgent) }
            cacheStatus = record.cacheStatus
        }

        /// The span as a `ScopeSpans.spans` field.
        func write(into writer: inout SpanWriter) {
            writer.nested(2) { span in
                span.head(traceID: trace.traceID, spanID: trace.spanID, traceState: trace.traceState, parentSpanID: trace.parentSpanID)
                if let method, let route {
                    span.string(5, method, route)                                            // `METHOD route`
                } else {
                    span.string(5, method ?? "HTTP")
                }
                span.times(kind: .server, start: start, end: end)
                if let method {
                    span.attribute("http.request.method", method)
                    if let route { span.attribute("http.route", route) }
                    span.attribute("url.path", path)
                    span.attribute("url.scheme", "http")
                    if let host {
                        span.attribute("server.address", host)
                        if let port { span.attribute("server.port", int: Int64(port)) }
                    }
                    span.attribute("network.protocol.version", minorVersion == 0 ? "1.0" : "1.1")
                    if let userAgent { span.attribute("user_agent.original", userAgent) }
                }
                span.attribute("http.response.status_code", int: Int64(status))
                if let client { span.attribute("client.address", client) }
                if let requestID { span.attribute("veneer.request_id", requestID) }
                if let cacheStatus { span.attribute("veneer.cache_status", cacheStatus) }
                if let refusal { span.attribute("veneer.refusal", refusal) }
                if let error { span.status(error) }
            }
        }
    }

    /// Sends the spans of an answered request to `sink` when its trace is sampled. (The
    /// request's parts apart, not a tuple of them, and its span's fields made whole at once
    /// into a constant: each copy of the head or of the fields retained and released a dozen
    /// strings; callgrind.)
    static func export(_ head: HTTP1RequestParser.Head, received: NIODeadline, record: RequestRecord, _ response: ProxyResponse,
                       client: ClientAddress?, now: NIODeadline, to sink: any SpanSink) {
        guard let trace = record.trace else {
            // Not in a trace of its own (none is made without telemetry): a new one, as a refusal's.
            var ids = TraceIDGenerator()
            let trace = TraceContext.start(traceparent: nil, tracestate: nil, sampler: sink.sampler, ids: &ids)
            guard trace.sampled else { return }
            let fields = fields(response, client: client, trace: trace, ownAnswer: record.originTime == nil)
            record.exportSpans(rootBound: fields.bound, to: sink) { fields.write(into: &$0) }
            return
        }
        guard trace.sampled else { return }
        let fields = fields(response, client: client, trace: trace, ownAnswer: record.originTime == nil, head: head, received: received,
                            record: record, now: now)
        record.exportSpans(rootBound: fields.bound, to: sink) { fields.write(into: &$0) }
    }

    /// Sends the span of a refusal of what could not be read as a request: a root span of its
    /// own, sampled as a new trace.
    static func exportUnread(_ response: ProxyResponse, client: ClientAddress?, now: NIODeadline, to sink: any SpanSink) {
        var ids = TraceIDGenerator()
        let trace = TraceContext.start(traceparent: nil, tracestate: nil, sampler: sink.sampler, ids: &ids)
        guard trace.sampled else { return }
        let fields = fields(response, client: client, trace: trace, ownAnswer: true)
        sink.export(count: 1, bound: fields.bound) { fields.write(into: &$0) }
    }

    /// The server span's fields of `response`, with those of the request when its `head` is
    /// given (``Fields/add(_:received:record:now:)``); `ownAnswer`: Veneer answered, no origin was asked.
    static func fields(_ response: ProxyResponse, client: ClientAddress?, trace: TraceContext, ownAnswer: Bool,
                       head: HTTP1RequestParser.Head? = nil, received: NIODeadline = .uptimeNanoseconds(0), record: RequestRecord? = nil,
                       now: NIODeadline = .uptimeNanoseconds(0)) -> Fields {
        let end = SpanNote.now()
        let status = Int(response.status.code)
        var fields = Fields(trace: trace, start: end, end: end, status: status, client: client?.description,
                            requestID: response.headers[.xRequestID])
        if status >= 400, ownAnswer, let code = errorCode(response.body) {
            // Veneer's own answer: its error code is the reason.
            fields.refusal = code
            fields.error = code
        } else if status >= 500 {
            fields.error = "HTTP \(status)"
        }
        if let head, let record { fields.add(head, received: received, record: record, now: now) }
        return fields
    }

    /// `host:port`, `[v6]:port` or a bare host, as the semantic conventions split them (no
    /// brackets; the host's first 256 bytes; a port of digits only).
    static func hostAndPort(_ authority: String) -> (host: String, port: Int?) {
        var authority = authority
        // On the bytes by integer offsets (the separators are ASCII): slicing the `String`
        // rounds every index to a character (perf).
        return authority.withUTF8 { bytes -> (String, Int?) in
            var hostEnd = bytes.count
            var port: Int?
            if let colon = bytes.lastIndex(of: UInt8(ascii: ":")), !bytes[colon...].contains(UInt8(ascii: "]")),
               bytes.first == UInt8(ascii: "[") || bytes.firstIndex(of: UInt8(ascii: ":")) == colon {
                hostEnd = colon
                let digits = bytes[(colon + 1)...]
                if (1...9).contains(digits.count), digits.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) {
                    port = digits.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
                }
            }
            var hostStart = 0
            if hostEnd >= 2, bytes[0] == UInt8(ascii: "["), bytes[hostEnd - 1] == UInt8(ascii: "]") {
                hostStart = 1
                hostEnd -= 1
            }
            return (String(decoding: UnsafeBufferPointer(rebasing: bytes[hostStart..<min(hostEnd, hostStart + 256)]), as: UTF8.self), port)
        }
    }

    /// The `error` of a body Veneer wrote (`{"error":"code",...}`, ``ProxyError``), if it is one.
    static func errorCode(_ body: ByteBuffer) -> String? {
        let prefix = "{\"error\":\""
        guard body.readableBytes > prefix.utf8.count, let head = body.getString(at: body.readerIndex, length: min(body.readableBytes, 64)),
              head.hasPrefix(prefix) else { return nil }
        let rest = head.dropFirst(prefix.count)
        guard let close = rest.firstIndex(of: "\"") else { return nil }
        return String(rest[..<close])
    }
}
