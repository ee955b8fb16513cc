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
            makeFields()
            foldAppended()
            serializedPrefix = nil
            yield &fields
        }
        set {
            serializedPrefix = nil
            fieldsAreLines = false
            appendedFields = []
            fields = newValue
        }
    }
    /// The whole body.
    public var body: ByteBuffer
    /// The first fields of ``headers`` already serialized (see ``SerializedFields``), kept
    /// only as long as nothing changes them: setting or mutating ``headers`` drops it,
    /// ``appendHeader(_:)`` does not.
    public private(set) var serializedPrefix: SerializedFields?
    /// The fields of ``headers`` up to the appended ones. For a response made from field
    /// lines alone (``init(status:fieldLines:body:)``), made from them at each call until the
    /// headers are changed.
    public var storedHeaders: HTTPFields {
        guard fieldsAreLines, let serializedPrefix else { return fields }
        return serializedPrefix.makeFields()
    }
    /// Fields appended after ``storedHeaders`` while they have a serialized prefix: kept
    /// apart so that a cached entry's shared fields are not copied to add `Age` to them.
    public private(set) var appendedFields: [HTTPField] = []
    private var fields: HTTPFields
    /// Whether the stored fields exist only as ``serializedPrefix`` (``fields`` is empty).
    private var fieldsAreLines = false

    /// Creates a response.
    public init(status: HTTPResponse.Status, headers: HTTPFields = [:], body: ByteBuffer = ByteBuffer()) {
        self.status = status
        self.fields = headers
        self.body = body
    }

    /// A response whose headers' leading fields are already serialized in `prefix`, which
    /// must have been made from exactly these `headers`.
    public init(status: HTTPResponse.Status, headers: HTTPFields, serializedPrefix prefix: SerializedFields?, body: ByteBuffer) {
        self.status = status
        self.fields = headers
        self.body = body
        self.serializedPrefix = prefix.flatMap { $0.count == headers.count ? $0 : nil }
    }

    /// A response whose header fields are `lines` alone (a response read off an upstream
    /// connection): passed on as they are, they are never made into `HTTPField`s; reading
    /// ``headers`` makes them, changing them makes them once.
    public init(status: HTTPResponse.Status, fieldLines lines: SerializedFields, body: ByteBuffer) {
        self.status = status
        self.fields = HTTPFields()
        self.body = body
        self.serializedPrefix = lines
        fieldsAreLines = true
    }

    /// Appends a field, keeping the serialized leading fields (they are still the leading ones).
    public mutating func appendHeader(_ field: HTTPField) {
        if serializedPrefix == nil {
            fields.append(field)
        } else {
            if appendedFields.isEmpty { appendedFields.reserveCapacity(4) }
            appendedFields.append(field)
        }
    }

    /// Whether ``headers`` has a field named `name` (without putting them together).
    public func containsHeader(_ name: HTTPField.Name) -> Bool {
        if fieldsAreLines, let serializedPrefix {
            return serializedPrefix.contains(name) || appendedFields.contains { $0.name == name }
        }
        return fields.contains(name) || appendedFields.contains { $0.name == name }
    }

    /// What `headers[name]` gives (the values of the fields named `name`, joined with ", "),
    /// without putting the headers together; for a name that is either stored or appended,
    /// the stored values only.
    public func header(_ name: HTTPField.Name) -> String? {
        if fieldsAreLines, let serializedPrefix, !serializedPrefix.contains(name) {
            return appendedFields.first { $0.name == name }?.value
        }
        return storedHeaders[name] ?? appendedFields.first { $0.name == name }?.value
    }

    /// Makes the stored fields from their lines, for good (before a change).
    private mutating func makeFields() {
        guard fieldsAreLines, let serializedPrefix else { return }
        fields = serializedPrefix.makeFields()
        fieldsAreLines = false
    }

    private mutating func foldAppended() {
        guard !appendedFields.isEmpty else { return }
        fields.append(contentsOf: appendedFields)
        appendedFields = []
    }

    /// A JSON response with `Content-Type: application/json`.
    public static func json(_ status: HTTPResponse.Status, _ body: ByteBuffer, headers: HTTPFields = [:]) -> ProxyResponse {
        var headers = headers
        headers[.contentType] = "application/json"
        return ProxyResponse(status: status, headers: headers, body: body)
    }
}
