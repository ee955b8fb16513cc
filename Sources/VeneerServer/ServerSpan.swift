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
    /// only with a `traceparent`: without one it is dropped anyway). Whether there is a
    /// `traceparent` is asked first: the fields' subscript, which joins repeated fields, made a
    /// sequence and an iterator of them even when there was none (130 instructions per request; callgrind).
    static func context(_ fields: HTTPFields, sampler: TraceSampler) -> TraceContext {
        var ids = TraceIDGenerator()
        let parent: String? = fields.contains { $0.name == .traceparent } ? fields[.traceparent] : nil
        let state: String? = parent == nil ? nil : fields[.tracestate]
        return TraceContext.start(traceparent: parent, tracestate: state, sampler: sampler, ids: &ids)
    }

    /// What a server span says, the request's own strings (no attribute array is made):
    /// written straight into the sink's batch by ``write(into:)``, the bytes a ``SpanNote`` of
    /// the same attributes would be. Never copied (a copy, made where the closure that writes
    /// it captured it, retained and released its dozen strings twice: about 700 instructions
    /// per sampled hit; callgrind): the closure borrows it.
    struct Fields: ~Copyable {
        var trace: TraceContext
        var start: Int64
        var end: Int64
        /// Nil for what could not be read as a request (the span is then named `HTTP`).
        var method: String?
        /// The span's name (`METHOD route`, or the method) as its field, encoded (``Memo``);
        /// empty for what could not be read as a request.
        var name: [UInt8] = []
        /// `http.request.method` and `http.route`, encoded (``Memo``).
        var request: [UInt8] = []
        var path: Substring = ""
        /// `url.scheme`, `server.address`, `server.port` and `network.protocol.version`,
        /// encoded (``Memo``); empty for what could not be read as a request.
        var connection: [UInt8] = []
        var userAgent: String?
        var status: Int
        /// `client.address`, encoded (``Memo``); empty without a client.
        var client: [UInt8]
        var requestID: String?
        var cacheStatus: String?
        var refusal: String?
        var error: String?

        /// The longest attribute key written (`http.response.status_code`) at most.
        private static let keyBound = 32

        /// At most how many bytes ``write(into:)`` writes (``SpanWriter/bound(of:)``'s
        /// arithmetic, each of the 6 attributes not encoded beforehand counted with the longest key).
        var bound: Int {
            func size(_ text: String?) -> Int { text?.utf8.count ?? 0 }
            // The name (`HTTP`, or encoded), then the values.
            var total = SpanWriter.fixedBound + 6 + 4 + name.count + request.count + path.utf8.count
            total += 6 * (29 + Self.keyBound) + connection.count + client.count
            total += size(userAgent) + size(requestID) + size(cacheStatus) + size(refusal)
            if let state = trace.traceState { total += 6 + state.utf8.count }
            if let error { total += 14 + error.utf8.count }
            return total
        }

        /// Adds what the request says (the HTTP semantic conventions' attributes), `received`
        /// when its head was read and `now` when its answer was written; its authority split
        /// by `memo`, its connection's.
        mutating func add(_ head: HTTP1RequestParser.Head, received: NIODeadline, record: RequestRecord, now: NIODeadline, memo: inout Memo) {
            start = end - (now - received).nanoseconds
            let method = head.method.rawValue
            self.method = method
            (name, request) = memo.request(method: method, route: record.route)
            // The path without its query, found on the bytes (the generic `pathWithoutQuery`
            // walked the string's indices; callgrind), counted in bytes first: `prefix` walks characters.
            var target = head.target
            let pathBytes = target.withUTF8 { bytes in bytes.firstIndex(of: UInt8(ascii: "?")) ?? bytes.count }
            let path = target.utf8.count == pathBytes ? target[...] : Substring(target.utf8.prefix(pathBytes))
            self.path = pathBytes <= AccessLogEntry.maxPath ? path : path.prefix(AccessLogEntry.maxPath)
            connection = memo.connection(authority: head.authority, minorVersion: head.minorVersion)
            if let agent = head.fields[.userAgent] { userAgent = AccessLogEntry.trimmed(agent, to: AccessLogEntry.maxUserAgent) }
            cacheStatus = record.cacheStatus
        }

        /// The span as a `ScopeSpans.spans` field.
        func write(into writer: inout SpanWriter) {
            writer.nested(2) { span in
                span.head(traceID: trace.traceID, spanID: trace.spanID, traceState: trace.traceState, parentSpanID: trace.parentSpanID)
                if name.isEmpty {
                    span.string(5, method ?? "HTTP")
                } else {
                    name.withUnsafeBufferPointer { span.raw($0) }                            // `METHOD route`
                }
                span.times(kind: .server, start: start, end: end)
                if method != nil {
                    request.withUnsafeBufferPointer { span.raw($0) }                         // http.request.method, http.route
                    span.attribute("url.path", path)
                    connection.withUnsafeBufferPointer { span.raw($0) }
                    if let userAgent { span.attribute("user_agent.original", userAgent) }
                }
                span.attribute("http.response.status_code", int: Int64(status))
                client.withUnsafeBufferPointer { span.raw($0) }
                if let requestID { span.attribute("veneer.request_id", requestID) }
                if let cacheStatus { span.attribute("veneer.cache_status", cacheStatus) }
                if let refusal { span.attribute("veneer.refusal", refusal) }
                if let error { span.status(error) }
            }
        }
    }

    /// What the server spans of one connection's requests share, made once for it rather
    /// than per sampled request (a connection comes from one client, and names one authority
    /// as a rule): `client.address`, and `url.scheme`, `server.address`, `server.port` and
    /// `network.protocol.version` of the last authority and HTTP version, as encoded attributes
    /// (the authority's split, its host's string and these five attributes' encoding were a
    /// fifth of what a sampled hit's spans cost; callgrind); the span's name with
    /// `http.request.method` and `http.route` of the last method and route likewise (comparing
    /// two short strings costs a fifth of encoding them: about 470 instructions fewer per
    /// sampled hit; callgrind). Not `veneer.cache_status`: a hit's says its copy's age.
    struct Memo {
        /// `client.address`, encoded (empty without a client).
        let client: [UInt8]
        private var authority: String?
        private var minorVersion = -1
        private var encoded: [UInt8] = []
        private var method: String?
        private var route: String?
        private var name: [UInt8] = []
        private var request: [UInt8] = []

        /// The memo of a connection from `client`.
        init(client: ClientAddress?) {
            self.client = client.map { client in
                let text = client.description
                return Self.encode(bound: 29 + 14 + text.utf8.count) { $0.attribute("client.address", text) }
            } ?? []
        }

        /// The encoded attributes of a request to `authority` (``ServerSpan/hostAndPort(_:)``)
        /// in HTTP/1.`minorVersion`, kept for the next request that names the same.
        mutating func connection(authority: String?, minorVersion: Int) -> [UInt8] {
            if minorVersion == self.minorVersion, authority == self.authority { return encoded }
            let split = authority.map(ServerSpan.hostAndPort)
            encoded = Self.encode(bound: 4 * (29 + 24) + 4 + 3 + (split?.host.utf8.count ?? 0)) { writer in
                writer.attribute("url.scheme", "http")
                if let split {
                    writer.attribute("server.address", split.host)
                    if let port = split.port { writer.attribute("server.port", int: Int64(port)) }
                }
                writer.attribute("network.protocol.version", minorVersion == 0 ? "1.0" : "1.1")
            }
            self.authority = authority
            self.minorVersion = minorVersion
            return encoded
        }

        /// The span's name (`METHOD route`, or the method without a route) as its field, and the
        /// attributes `http.request.method` and `http.route`, encoded; kept for the next request
        /// of the same method and route.
        mutating func request(method: String, route: String?) -> (name: [UInt8], attributes: [UInt8]) {
            if !name.isEmpty, method == self.method, route == self.route { return (name, request) }
            let sizes = method.utf8.count + (route?.utf8.count ?? 0)
            name = Self.encode(bound: 6 + 1 + sizes) { writer in
                if let route { writer.string(5, method, route) } else { writer.string(5, method) }
            }
            request = Self.encode(bound: 2 * (29 + 24) + sizes) { writer in
                writer.attribute("http.request.method", method)
                if let route { writer.attribute("http.route", route) }
            }
            self.method = method
            self.route = route
            return (name, request)
        }

        /// The bytes `write` writes, at most `bound`.
        private static func encode(bound: Int, _ write: (inout SpanWriter) -> Void) -> [UInt8] {
            [UInt8](unsafeUninitializedCapacity: bound) { buffer, count in
                guard let base = buffer.baseAddress else { return }
                var writer = SpanWriter(base: base)
                write(&writer)
                precondition(writer.count <= bound, "OTLP encoding exceeded its bound")
                count = writer.count
            }
        }
    }

    /// Sends the spans of an answered request to `sink` when its trace is sampled; `requestID`
    /// is the id the edge gave it (the answer's `X-Request-ID`, without looking for it), `memo`
    /// its connection's. (The request's parts apart, not a tuple of them, and its span's fields
    /// made whole at once into a constant: each copy of the head or of the fields retained and
    /// released a dozen strings; callgrind.)
    static func export(_ head: HTTP1RequestParser.Head, received: NIODeadline, record: RequestRecord, _ response: ProxyResponse,
                       requestID: String?, memo: inout Memo, now: NIODeadline, to sink: any SpanSink) {
        guard let trace = record.trace else {
            // Not in a trace of its own (none is made without telemetry): a new one, as a refusal's.
            var ids = TraceIDGenerator()
            let trace = TraceContext.start(traceparent: nil, tracestate: nil, sampler: sink.sampler, ids: &ids)
            guard trace.sampled else { return }
            let fields = fields(response, client: memo.client, requestID: requestID, trace: trace, ownAnswer: record.originTime == nil)
            record.exportSpans(rootBound: fields.bound, to: sink) { fields.write(into: &$0) }
            return
        }
        guard trace.sampled else { return }
        var fields = fields(response, client: memo.client, requestID: requestID, trace: trace, ownAnswer: record.originTime == nil)
        fields.add(head, received: received, record: record, now: now, memo: &memo)
        // Moved into a constant that the closure borrows: a variable it captures was copied into
        // its context, every string retained and released (about 500 instructions; callgrind).
        let span = consume fields
        record.exportSpans(rootBound: span.bound, to: sink) { span.write(into: &$0) }
    }

    /// Sends the span of a refusal of what could not be read as a request: a root span of its
    /// own, sampled as a new trace.
    static func exportUnread(_ response: ProxyResponse, client: ClientAddress?, now: NIODeadline, to sink: any SpanSink) {
        var ids = TraceIDGenerator()
        let trace = TraceContext.start(traceparent: nil, tracestate: nil, sampler: sink.sampler, ids: &ids)
        guard trace.sampled else { return }
        let fields = fields(response, client: ServerSpan.Memo(client: client).client, requestID: nil, trace: trace, ownAnswer: true)
        sink.export(count: 1, bound: fields.bound) { fields.write(into: &$0) }
    }

    /// The server span's fields of `response` (those of the request are added by
    /// ``Fields/add(_:received:record:now:memo:)``); `requestID` nil: the answer's
    /// `X-Request-ID`, if any; `ownAnswer`: Veneer answered, no origin was asked.
    static func fields(_ response: ProxyResponse, client: [UInt8], requestID: String?, trace: TraceContext, ownAnswer: Bool) -> Fields {
        let end = SpanNote.now()
        let status = Int(response.status.code)
        var fields = Fields(trace: trace, start: end, end: end, status: status, client: client,
                            requestID: requestID ?? response.headers[.xRequestID])
        if status >= 400, ownAnswer, let code = errorCode(response.body) {
            // Veneer's own answer: its error code is the reason.
            fields.refusal = code
            fields.error = code
        } else if status >= 500 {
            fields.error = "HTTP \(status)"
        }
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
