import HTTPTypes
import NIOCore

/// A response as every handler returns it: status, end-to-end headers, and a body that is
/// either whole (``body``) or a stream (``stream``, with ``body`` empty).
///
/// Most answers are whole, and that is what decorators see. An upstream answer of unknown
/// length or over the streaming threshold comes as a stream; a decorator that needs its bytes
/// says so with ``collected(upTo:)`` (or taps the stream, ``BodyStream/tap(_:)``).
public struct ProxyResponse: Sendable {
    /// The status.
    public var status: HTTPResponse.Status
    /// End-to-end headers; the edge sets `Content-Length` from ``body``.
    public var headers: ProxyHeaders
    /// The whole body (empty when it is a ``stream``).
    public var body: ByteBuffer
    /// The body as it arrives, when it is not whole; nil for a whole body.
    public var stream: BodyStream?
    /// The share of `limits.buffered` a whole body read into memory holds (an upstream answer
    /// read whole, a streamed one a decorator collected), given back when the last copy of
    /// the response goes; nil for bodies that take nothing from it.
    public var reservation: BufferBudget.Reservation?

    /// Creates a response.
    public init(status: HTTPResponse.Status, headers: ProxyHeaders = ProxyHeaders(), body: ByteBuffer = ByteBuffer()) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A response whose body comes as `stream`.
    public init(status: HTTPResponse.Status, headers: ProxyHeaders = ProxyHeaders(), stream: BodyStream) {
        self.status = status
        self.headers = headers
        self.body = ByteBuffer()
        self.stream = stream
    }

    /// Whether the body is a stream rather than whole.
    public var isStreamed: Bool { stream != nil }

    /// The response with its body whole: a streamed body is read in, up to `limit` bytes (more
    /// is `upstream_unavailable`, a 502, as for any answer over `limits.response_body`), taken
    /// from `budget` while it is read (``BodyStream/collect(upTo:budget:)``).
    public func collected(upTo limit: Int, budget: BufferBudget? = nil) async throws -> ProxyResponse {
        guard let stream else { return self }
        var whole = self
        whole.stream = nil
        (whole.body, whole.reservation) = try await stream.collected(upTo: limit, budget: budget)
        return whole
    }

    /// Drops a streamed body nobody will read (an answer replaced by another): its upstream
    /// connection is closed rather than left holding the rest.
    public func discardBody() {
        stream?.cancel()
    }

    /// A JSON response with `Content-Type: application/json`.
    public static func json(_ status: HTTPResponse.Status, _ body: ByteBuffer, headers: ProxyHeaders = ProxyHeaders()) -> ProxyResponse {
        var headers = headers
        headers[.contentType] = "application/json"
        return ProxyResponse(status: status, headers: headers, body: body)
    }
}
