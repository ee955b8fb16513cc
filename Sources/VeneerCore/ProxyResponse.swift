import HTTPTypes
import NIOCore

/// A response as every handler returns it: status, end-to-end headers, buffered body.
public struct ProxyResponse: Sendable {
    /// The status.
    public var status: HTTPResponse.Status
    /// End-to-end headers; the edge sets `Content-Length` from ``body``.
    public var headers: HTTPFields {
        get {
            guard !appendedFields.isEmpty else { return storedHeaders }
            var headers = storedHeaders
            headers.append(contentsOf: appendedFields)
            return headers
        }
        _modify {
            // Any change may touch the serialized leading fields: forget them.
            foldAppended()
            serializedPrefix = nil
            yield &storedHeaders
        }
        set {
            serializedPrefix = nil
            appendedFields = []
            storedHeaders = newValue
        }
    }
    /// The whole body.
    public var body: ByteBuffer
    /// The first fields of ``headers`` already serialized (see ``SerializedFields``), kept
    /// only as long as nothing changes them: setting or mutating ``headers`` drops it,
    /// ``appendHeader(_:)`` does not.
    public private(set) var serializedPrefix: SerializedFields?
    /// The fields of ``headers`` up to the appended ones.
    public private(set) var storedHeaders: HTTPFields
    /// Fields appended after ``storedHeaders`` while they have a serialized prefix: kept
    /// apart so that a cached entry's shared fields are not copied to add `Age` to them.
    public private(set) var appendedFields: [HTTPField] = []

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
        if serializedPrefix == nil {
            storedHeaders.append(field)
        } else {
            if appendedFields.isEmpty { appendedFields.reserveCapacity(4) }
            appendedFields.append(field)
        }
    }

    /// Whether ``headers`` has a field named `name` (without putting them together).
    public func containsHeader(_ name: HTTPField.Name) -> Bool {
        storedHeaders.contains(name) || appendedFields.contains { $0.name == name }
    }

    /// What `headers[name]` gives (the values of the fields named `name`, joined with ", "),
    /// without putting the headers together; for a name that is either stored or appended,
    /// the stored values only.
    public func header(_ name: HTTPField.Name) -> String? {
        storedHeaders[name] ?? appendedFields.first { $0.name == name }?.value
    }

    private mutating func foldAppended() {
        guard !appendedFields.isEmpty else { return }
        storedHeaders.append(contentsOf: appendedFields)
        appendedFields = []
    }

    /// A JSON response with `Content-Type: application/json`.
    public static func json(_ status: HTTPResponse.Status, _ body: ByteBuffer, headers: HTTPFields = [:]) -> ProxyResponse {
        var headers = headers
        headers[.contentType] = "application/json"
        return ProxyResponse(status: status, headers: headers, body: body)
    }
}
