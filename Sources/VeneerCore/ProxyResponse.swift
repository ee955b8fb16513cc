import HTTPTypes
import NIOCore

/// A response as every handler returns it: status, end-to-end headers, buffered body.
public struct ProxyResponse: Sendable {
    /// The status.
    public var status: HTTPResponse.Status
    /// End-to-end headers; the edge sets `Content-Length` from ``body``.
    public var headers: ProxyHeaders
    /// The whole body.
    public var body: ByteBuffer

    /// Creates a response.
    public init(status: HTTPResponse.Status, headers: ProxyHeaders = ProxyHeaders(), body: ByteBuffer = ByteBuffer()) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A JSON response with `Content-Type: application/json`.
    public static func json(_ status: HTTPResponse.Status, _ body: ByteBuffer, headers: ProxyHeaders = ProxyHeaders()) -> ProxyResponse {
        var headers = headers
        headers[.contentType] = "application/json"
        return ProxyResponse(status: status, headers: headers, body: body)
    }
}
