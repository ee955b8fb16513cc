import HTTPTypes
import NIOCore

/// A response as every handler returns it: status, end-to-end headers, buffered body.
public struct ProxyResponse: Sendable {
    /// The status.
    public var status: HTTPResponse.Status
    /// End-to-end headers; the edge sets `Content-Length` from ``body``.
    public var headers: HTTPFields {
        get { storedHeaders }
        _modify {
            // Any change may touch the serialized leading fields: forget them.
            serializedPrefix = nil
            yield &storedHeaders
        }
        set {
            serializedPrefix = nil
            storedHeaders = newValue
        }
    }
    /// The whole body.
    public var body: ByteBuffer
    /// The first fields of ``headers`` already serialized (see ``SerializedFields``), kept
    /// only as long as nothing changes them: setting or mutating ``headers`` drops it,
    /// ``appendHeader(_:)`` does not.
    public private(set) var serializedPrefix: SerializedFields?
    private var storedHeaders: HTTPFields

    /// Creates a response.
    public init(status: HTTPResponse.Status, headers: HTTPFields = [:], body: ByteBuffer = ByteBuffer()) {
        self.status = status
        self.storedHeaders = headers
        self.body = body
    }

    /// A response whose headers' leading fields are already serialized in `prefix`, which
    /// must have been made from exactly these `headers`.
    public init(status: HTTPResponse.Status, headers: HTTPFields, serializedPrefix prefix: SerializedFields?, body: ByteBuffer) {
        self.status = status
        self.storedHeaders = headers
        self.body = body
        self.serializedPrefix = prefix.flatMap { $0.count == headers.count ? $0 : nil }
    }

    /// Appends a field, keeping the serialized leading fields (they are still the leading ones).
    public mutating func appendHeader(_ field: HTTPField) {
        storedHeaders.append(field)
    }

    /// Makes room for `count` more fields, keeping the serialized leading fields (one copy
    /// of shared fields before several appends instead of a regrowth per append).
    public mutating func reserveHeaderCapacity(_ count: Int) {
        storedHeaders.reserveCapacity(storedHeaders.count + count)
    }

    /// A JSON response with `Content-Type: application/json`.
    public static func json(_ status: HTTPResponse.Status, _ body: ByteBuffer, headers: HTTPFields = [:]) -> ProxyResponse {
        var headers = headers
        headers[.contentType] = "application/json"
        return ProxyResponse(status: status, headers: headers, body: body)
    }
}
