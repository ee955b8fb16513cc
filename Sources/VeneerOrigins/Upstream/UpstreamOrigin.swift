import CoreMetrics
import HTTPTypes
import NIOCore
import VeneerCore

/// The `upstream` origin: forwards each request to the real API over a shared connection pool.
///
/// The path sent is rebuilt from the typed route (never the client's raw path), hop-by-hop
/// headers are gone in both directions, `X-Forwarded-For` gets the client's address, and
/// redirects come back to the caller instead of being followed.
///
/// An answer of unknown length (chunked, close-delimited: server-sent events) or longer than
/// ``streamThreshold`` comes back as a ``BodyStream`` on the pooled `http://` transport: it
/// passes to the client as it arrives, whatever its size, and only a decorator that asks for
/// the whole body (``ProxyResponse/collected(upTo:)``) is bound by `limits.response_body`.
public struct UpstreamOrigin: CallbackAnswering {
    /// Answers with a declared length up to this are read whole; longer ones stream.
    public static let streamThreshold = 256 << 10

    let options: UpstreamOriginOptions
    let transport: any HTTPTransport
    let maxResponseBodySize: Int
    /// Nil: every answer is read whole (up to ``maxResponseBodySize``).
    let streamThreshold: Int?
    let bodyTimeout: Duration
    let clock: any VeneerClock
    /// Where the time each request took goes (`veneer_upstream_request_duration_seconds`).
    let durations: CoreMetrics.Timer?
    /// Request fields addressed to decorators (``BuildContext/requestDirectives``): never the
    /// upstream's business, whether or not the chain has the decorator to take them off.
    let directives: [HTTPField.Name]
    /// `limits.buffered`: an answer read whole takes its share (one with no room streams instead).
    var buffers: BufferBudget?

    /// Creates an upstream origin that sends through `transport`; `directives` are the
    /// request fields it never passes on (``BuildContext/requestDirectives``).
    /// `streamThreshold`: answers of unknown length or longer than that stream (nil: none do),
    /// pausing at most `bodyTimeout`.
    public init(options: UpstreamOriginOptions, transport: any HTTPTransport, maxResponseBodySize: Int = 16 << 20,
                streamThreshold: Int? = nil, bodyTimeout: Duration = .seconds(30),
                clock: any VeneerClock = SystemClock(), durations: CoreMetrics.Timer? = nil, directives: [HTTPField.Name] = []) {
        self.options = options
        self.transport = transport
        self.maxResponseBodySize = maxResponseBodySize
        self.streamThreshold = streamThreshold
        self.bodyTimeout = bodyTimeout
        self.clock = clock
        self.durations = durations
        self.directives = directives
    }

    /// Forwards the request; the time it took goes into the request's record.
    public func handle(_ request: ProxyRequest) async throws -> ProxyResponse {
        let start = clock.monotonic()
        let span = request.record.beginOutgoing()
        defer { Self.note(clock.monotonic() - start, in: request.record, durations) }
        do {
            let response = try await transport.send(outbound(request, trace: span?.trace))
            if let span, span.recorded { Self.end(span, request, host: options.endpoint.host, status: Int(response.status.code), error: nil) }
            return response
        } catch {
            if let span, span.recorded { Self.end(span, request, host: options.endpoint.host, status: nil, error: error) }
            throw error
        }
    }

    /// Ends the client span of one attempt (noted only when its trace is sampled).
    static func end(_ span: RequestRecord.OutgoingSpan, _ request: ProxyRequest, host: String, status: Int?, error: (any Error)?) {
        var attributes: [(key: String, value: SpanNote.Value)] = [
            ("http.request.method", .string(request.method.rawValue)), ("server.address", .string(host)),
            ("url.path", .string(request.route.path)),
        ]
        if let status { attributes.append(("http.response.status_code", .int(Int64(status)))) }
        let failure = error.map { ($0 as? ProxyError)?.code.rawValue ?? "internal" }
        request.record.endOutgoing(span, name: request.method.rawValue, attributes: attributes,
                                   error: failure ?? (status.map { $0 >= 500 } == true ? "HTTP \(status!)" : nil))
    }

    /// The time one request took: in its record (the access log, `Server-Timing`) and the histogram.
    static func note(_ elapsed: Duration, in record: RequestRecord, _ durations: CoreMetrics.Timer?) {
        record.noteOrigin("upstream", time: elapsed)
        guard let durations else { return }
        let parts = elapsed.components
        durations.recordNanoseconds(parts.seconds * 1_000_000_000 + parts.attoseconds / 1_000_000_000)
    }

    /// Whether the transport can send to the upstream without a task (plain `http://` on
    /// Veneer's pooled transport).
    public var startsWithoutTask: Bool { transport.startsWithoutTask(to: options.endpoint) }

    /// Forwards the request without a task when the transport can; the time it took goes
    /// into the request's record.
    public func startAnswer(_ request: ProxyRequest, then done: @escaping @Sendable (Result<ProxyResponse, any Error>) -> Void) -> Bool {
        let start = clock.monotonic()
        let outgoing = request.record.beginOutgoing()
        guard let span = outgoing, span.recorded else {
            // No span to end (no telemetry, or an unsampled trace: its context only passed on):
            // the callback holds no copy of the request.
            return transport.start(outbound(request, trace: outgoing?.trace)) { [clock, durations, record = request.record] result in
                Self.note(clock.monotonic() - start, in: record, durations)
                done(result)
            }
        }
        return transport.start(outbound(request, trace: span.trace)) { [clock, durations, host = options.endpoint.host] result in
            Self.note(clock.monotonic() - start, in: request.record, durations)
            switch result {
            case .success(let response): Self.end(span, request, host: host, status: Int(response.status.code), error: nil)
            case .failure(let error): Self.end(span, request, host: host, status: nil, error: error)
            }
            done(result)
        }
    }

    /// The request as it goes to the upstream; with `trace` (its trace has `telemetry`), the
    /// transport writes Veneer's `traceparent` in place of the caller's, and the caller's
    /// `tracestate` only if its trace was continued (``OutboundRequest/trace``).
    /// The caller's fields are shared, not copied, unless one must change: a directive to
    /// take off, an `X-Forwarded-For` to extend (the client's address alone goes in
    /// ``OutboundRequest/forwardedFor``). The path goes as the request's route
    /// (``OutboundRequest/route``), written from its parts by the pooled transport: the string
    /// of prefix and path made per request cost about 500 instructions (callgrind).
    /// Inlined where the request is sent: the trace is no longer copied into an argument and
    /// destroyed after the call (callgrind: about 200 instructions a request; the request
    /// itself is still copied whole once on its way out).
    @inline(__always)
    func outbound(_ request: ProxyRequest, trace: OutgoingTrace? = nil) -> OutboundRequest {
        var headers = request.headers
        for directive in directives { headers[directive] = nil }
        var forwardedFor: String?
        if let client = request.client {
            let address = client.unmapped.description
            if let existing = headers.ifPresent(.xForwardedFor) {
                headers[.xForwardedFor] = existing.isEmpty ? address : existing + ", " + address
            } else {
                forwardedFor = address
            }
        }
        return OutboundRequest(
            method: request.method,
            endpoint: options.endpoint,
            target: "",
            query: request.query.flatMap { $0.isEmpty ? nil : $0 },
            headers: headers,
            forwardedFor: forwardedFor,
            body: request.stream == nil && (request.body.readableBytes > 0 || request.method == .post || request.method == .put || request.method == .patch)
                ? request.body : nil,
            bodyStream: request.stream,
            timeout: options.timeout,
            maxResponseBodySize: maxResponseBodySize,
            streamThreshold: streamThreshold,
            bodyTimeout: bodyTimeout,
            buffers: buffers,
            trace: trace,
            route: request.route)
    }
}
