import HTTPTypes
import NIOCore

/// Header fields as HTTP/1.1 field lines (`Name: value\r\n`), ready to be copied onto the
/// wire: hop-by-hop fields and `Content-Length` left out, with what the writer needs to know
/// about those it left out.
///
/// A ``ProxyResponse`` can carry the serialized form of its first ``count`` fields (the
/// cache keeps each stored response's fields serialized), so that serving it copies one
/// buffer instead of writing every field again.
public struct SerializedFields: Sendable {
    /// How many leading fields of the headers these lines stand for.
    public let count: Int
    /// The field lines.
    public let lines: ByteBuffer
    /// Whether one of them is `Date`.
    public let hasDate: Bool
    /// The value of a `Content-Length` field among them (left out of ``lines``).
    public let declaredLength: String?
    /// Whether there was a `Connection` field: the fields it names must go too, which these
    /// lines do not know, so they cannot be used.
    public let sawConnection: Bool

    init(count: Int, lines: ByteBuffer, hasDate: Bool, declaredLength: String?) {
        self.count = count
        self.lines = lines
        self.hasDate = hasDate
        self.declaredLength = declaredLength
        sawConnection = false
    }

    /// Serializes `headers`.
    public init(_ headers: HTTPFields) {
        var lines = ByteBuffer()
        lines.reserveCapacity(headers.count * 32)
        let facts = Self.write(headers, skipping: nil, into: &lines)
        self.count = headers.count
        self.lines = lines
        hasDate = facts.hasDate
        declaredLength = facts.declaredLength
        sawConnection = facts.sawConnection
    }

    /// What writing fields found out about those it left out or wrote.
    public typealias Facts = (hasDate: Bool, declaredLength: String?, sawConnection: Bool)

    /// Writes the end-to-end fields of `headers` (minus those in `named`, lower-case); says
    /// whether there was a `Date`, what `Content-Length` said, and whether a `Connection`
    /// field was seen. (Not generic: it runs for every response.)
    @discardableResult
    public static func write(_ headers: HTTPFields, skipping named: [String]?, into buffer: inout ByteBuffer) -> Facts {
        var facts: Facts = (false, nil, false)
        for field in headers {
            write(field, skipping: named, into: &buffer, facts: &facts)
        }
        return facts
    }

    /// ``write(_:skipping:into:)`` for fields in an array.
    @discardableResult
    public static func write(_ fields: [HTTPField], into buffer: inout ByteBuffer) -> Facts {
        var facts: Facts = (false, nil, false)
        for field in fields {
            write(field, skipping: nil, into: &buffer, facts: &facts)
        }
        return facts
    }

    @inline(__always)
    private static func write(_ field: HTTPField, skipping named: [String]?, into buffer: inout ByteBuffer, facts: inout Facts) {
        let name = field.name.canonicalName
        if HopByHop.isRemoved(name) {
            if field.name == .contentLength { facts.declaredLength = field.value }
            if field.name == .connection { facts.sawConnection = true }
            return
        }
        if let named, named.contains(name) { return }
        if field.name == .date { facts.hasDate = true }
        buffer.writeString(field.name.rawName)
        buffer.writeStaticString(": ")
        buffer.writeString(field.value)
        buffer.writeStaticString("\r\n")
    }
}
