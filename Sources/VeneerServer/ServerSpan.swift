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

    /// Sends the spans of an answered request to `sink` when its trace is sampled: `request`
    /// is nil for what could not be read as a request (a root span of its own, sampled as new).
    static func export(_ request: (head: HTTP1RequestParser.Head, received: NIODeadline, record: RequestRecord)?, _ response: ProxyResponse,
                       client: ClientAddress?, now: NIODeadline, to sink: any SpanSink) {
        let trace: TraceContext
        if let context = request?.record.trace {
            trace = context
        } else {
            var ids = TraceIDGenerator()
            trace = TraceContext.start(traceparent: nil, tracestate: nil, sampler: sink.sampler, ids: &ids)
        }
        guard trace.sampled else { return }
        let end = SpanNote.now()
        let status = Int(response.status.code)
        var attributes: [(key: String, value: SpanNote.Value)] = []
        attributes.reserveCapacity(12)
        var name = "HTTP"
        var start = end
        if let request {
            let head = request.head
            start = end - (now - request.received).nanoseconds
            attributes.append(("http.request.method", .string(head.method.rawValue)))
            if let route = request.record.route {
                attributes.append(("http.route", .string(route)))
                name = head.method.rawValue + " " + route
            } else {
                name = head.method.rawValue
            }
            let path = RequestRedaction.pathWithoutQuery(head.target)
            // Counted in bytes first: `prefix` walks characters.
            attributes.append(("url.path", .string(path.utf8.count <= AccessLogEntry.maxPath ? String(path) : String(path.prefix(AccessLogEntry.maxPath)))))
            attributes.append(("url.scheme", .string("http")))
            if let authority = head.authority {
                let (host, port) = hostAndPort(authority)
                attributes.append(("server.address", .string(host)))
                if let port { attributes.append(("server.port", .int(Int64(port)))) }
            }
            attributes.append(("network.protocol.version", .string(head.minorVersion == 0 ? "1.0" : "1.1")))
            if let agent = head.fields[.userAgent] {
                attributes.append(("user_agent.original", .string(AccessLogEntry.trimmed(agent, to: AccessLogEntry.maxUserAgent))))
            }
        }
        attributes.append(("http.response.status_code", .int(Int64(status))))
        if let client { attributes.append(("client.address", .string(client.description))) }
        if let requestID = response.headers[.xRequestID] { attributes.append(("veneer.request_id", .string(requestID))) }
        if let cacheStatus = request?.record.cacheStatus { attributes.append(("veneer.cache_status", .string(cacheStatus))) }
        var error: String?
        // Veneer's own answer (no origin asked): its error code is the reason.
        if status >= 400, request?.record.originTime == nil, let code = errorCode(response.body) {
            attributes.append(("veneer.refusal", .string(code)))
            error = code
        } else if status >= 500 {
            error = "HTTP \(status)"
        }
        var spans: [SpanNote] = []
        // The server span, then its children into the same array (one allocation; a hit's cache span fits).
        spans.reserveCapacity(4)
        spans.append(SpanNote(name: name, kind: .server, traceID: trace.traceID, spanID: trace.spanID, parentSpanID: trace.parentSpanID,
                              start: start, end: end, attributes: attributes, error: error, traceState: trace.traceState))
        request?.record.appendChildSpans(to: &spans)
        sink.export(spans)
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
