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

    /// One bit per name length, first and last letter of the lines' names: a name whose
    /// bit is clear is not among them (``contains(_:)`` answers most questions without a scan).
    public let nameBits: UInt64

    /// The lines a parser kept.
    init(_ raw: RawLines) {
        count = raw.count
        lines = raw.buffer
        hasDate = raw.hasDate
        declaredLength = raw.declaredLength
        sawConnection = false
        nameBits = raw.nameBits
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
        var bits: UInt64 = 0
        for field in headers {
            var name = field.name.canonicalName
            bits |= name.withUTF8 { Self.nameBit(UnsafeRawBufferPointer($0)) }
        }
        nameBits = bits
    }

    /// The bit of ``nameBits`` for a name, in any case.
    @inline(__always)
    static func nameBit(_ name: UnsafeRawBufferPointer) -> UInt64 {
        guard let first = name.first, let last = name.last else { return 0 }
        let mixed = name.count &* 7 &+ Int(HTTP1Syntax.lowercased(first)) &* 3 &+ Int(HTTP1Syntax.lowercased(last))
        return 1 << UInt64(mixed & 63)
    }

    /// The fields these lines stand for, made anew at each call (a response read off an
    /// upstream connection makes them only if something asks). A `Content-Length` left out
    /// of the lines comes last.
    public func makeFields() -> HTTPFields {
        var fields = HTTPFields()
        fields.reserveCapacity(count)
        lines.withUnsafeReadableBytes { bytes in
            var start = 0
            // The lines were checked when they were read: none fails here.
            while start < bytes.count, let line = try? HTTP1Syntax.fieldLine(bytes, from: start, to: bytes.count) {
                if let name = HTTP1Syntax.fieldName(UnsafeRawBufferPointer(rebasing: bytes[line.name])) {
                    fields.append(HTTPField(name: name, value: String(decoding: UnsafeRawBufferPointer(rebasing: bytes[line.value]), as: UTF8.self)))
                }
                start = line.lineEnd + 2
            }
        }
        if let declaredLength { fields.append(HTTPField(name: .contentLength, value: declaredLength)) }
        return fields
    }

    /// Whether a field named `name` is among these lines (or is the `Content-Length` left out).
    /// Only the lines: for lines made from fields (``init(_:)``), the hop-by-hop fields they
    /// left out are not found; ``ProxyResponse`` asks only when its fields are lines alone.
    public func contains(_ name: HTTPField.Name) -> Bool {
        if name == .contentLength, declaredLength != nil { return true }
        var wanted = name.canonicalName
        return wanted.withUTF8 { wanted in
            guard nameBits & Self.nameBit(UnsafeRawBufferPointer(wanted)) != 0 else { return false }
            return lines.withUnsafeReadableBytes { bytes in
                var start = 0
                while start < bytes.count {
                    var index = start
                    while index < bytes.count, bytes[index] != HTTP1Syntax.colon { index += 1 }
                    if HTTP1Syntax.equalsIgnoringCase(UnsafeRawBufferPointer(rebasing: bytes[start..<index]), UnsafeRawBufferPointer(wanted)) {
                        return true
                    }
                    while index < bytes.count, bytes[index] != HTTP1Syntax.lf { index += 1 }
                    start = index + 1
                }
                return false
            }
        }
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
