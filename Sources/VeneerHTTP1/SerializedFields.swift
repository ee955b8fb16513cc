import HTTPTypes
import NIOCore
import VeneerCore

/// Header fields as HTTP/1.1 field lines (``FieldLines``): made from the lines a parser
/// kept, or from fields (the writer does it once for a cached entry's fields, so that
/// serving the entry copies one buffer instead of writing every field again); and read back.
enum SerializedFields: FieldLineReader {
    /// The lines a parser kept.
    static func lines(_ raw: RawLines) -> FieldLines {
        FieldLines(bytes: raw.bytes, count: raw.count, hasDate: raw.hasDate, declaredLength: raw.declaredLength, sawConnection: false,
                   nameBits: raw.nameBits, reader: Self.self)
    }

    /// Serializes `fields` (hop-by-hop fields and `Content-Length` left out, as the writer does).
    static func lines(of fields: HTTPFields) -> FieldLines {
        var bytes = ByteBuffer()
        bytes.reserveCapacity(fields.count * 32)
        let facts = write(fields, skipping: nil, into: &bytes)
        var bits: UInt64 = 0
        for field in fields {
            var name = field.name.canonicalName
            bits |= name.withUTF8 { nameMask(UnsafeRawBufferPointer($0)) }
        }
        return FieldLines(bytes: Array(bytes.readableBytesView), count: fields.count, hasDate: facts.hasDate, declaredLength: facts.declaredLength,
                          sawConnection: facts.sawConnection, nameBits: bits, reader: Self.self)
    }

    /// The bits of ``FieldLines/nameBits`` for a name, in any case (a Bloom filter of two
    /// bits per name): one from its length, first and last letter, one from its length,
    /// middle and last but one letter. A name missing one of its bits is not among the lines.
    /// With two bits a lookup of an absent name reads the lines about half as often as with
    /// one (about 5% against 12% of lookups, ten fields stored), and the names looked up on
    /// every answer (`Cache-Status`, `X-Request-Id`, `Server-Timing`, `Veneer-Cache-Control`)
    /// are not covered even by all the usual fields of a cacheable answer together. With one
    /// bit, `Cache-Status` had `Cache-Control`'s: each hit's lookup read the entry's lines.
    @inline(__always)
    static func nameMask(_ name: UnsafeRawBufferPointer) -> UInt64 {
        let count = name.count
        guard count > 0 else { return 0 }
        let first = Int(HTTP1Syntax.lowercased(name[0])), last = Int(HTTP1Syntax.lowercased(name[count - 1]))
        let middle = Int(HTTP1Syntax.lowercased(name[count / 2])), lastButOne = Int(HTTP1Syntax.lowercased(name[max(0, count - 2)]))
        let one = count &* 7 &+ first &* 3 &+ last
        let other = count &+ (middle &+ lastButOne) &* 5
        return 1 << UInt64(one & 63) | 1 << UInt64(other & 63)
    }

    /// The fields the lines stand for, made anew at each call (``ProxyHeaders`` keeps what
    /// it makes). A `Content-Length` left out of the lines comes last.
    package static func fields(of lines: FieldLines) -> HTTPFields {
        var fields = HTTPFields()
        fields.reserveCapacity(lines.count)
        forEachLine(lines) { name, value in
            if let name = HTTP1Syntax.fieldName(name) {
                fields.append(HTTPField(name: name, value: String(decoding: value, as: UTF8.self)))
            }
            return true
        }
        if let declaredLength = lines.declaredLength { fields.append(HTTPField(name: .contentLength, value: declaredLength)) }
        return fields
    }

    /// Whether a field named `name` is among the lines (or is the `Content-Length` left out).
    /// For lines made from fields, the hop-by-hop fields they left out are not found: only
    /// lines read off a connection (which left out only what never passes a hop) are asked.
    package static func contains(_ name: HTTPField.Name, in lines: FieldLines) -> Bool {
        if name == .contentLength, lines.declaredLength != nil { return true }
        var wanted = name.canonicalName
        return wanted.withUTF8 { wanted in
            let wanted = UnsafeRawBufferPointer(wanted)
            let mask = nameMask(wanted)
            guard lines.nameBits & mask == mask else { return false }
            var found = false
            forEachLine(lines) { name, _ in
                found = HTTP1Syntax.equalsIgnoringCase(name, wanted)
                return !found
            }
            return found
        }
    }

    /// The values of the fields named `name`, as ``fields(of:)`` would give them.
    package static func values(_ name: HTTPField.Name, in lines: FieldLines) -> [String] {
        if name == .contentLength { return lines.declaredLength.map { [$0] } ?? [] }
        var wanted = name.canonicalName
        return wanted.withUTF8 { wanted in
            let wanted = UnsafeRawBufferPointer(wanted)
            var values: [String] = []
            forEachLine(lines) { name, value in
                if HTTP1Syntax.equalsIgnoringCase(name, wanted) { values.append(String(decoding: value, as: UTF8.self)) }
                return true
            }
            return values
        }
    }

    /// Calls `body` with each line's name and value (optional whitespace trimmed) until it
    /// returns false. The lines were checked when they were read: none fails here.
    private static func forEachLine(_ lines: FieldLines, _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Bool) {
        lines.bytes.withUnsafeBytes { bytes in
            var start = 0
            while start < bytes.count, let line = try? HTTP1Syntax.fieldLine(bytes, from: start, to: bytes.count) {
                guard body(UnsafeRawBufferPointer(rebasing: bytes[line.name]), UnsafeRawBufferPointer(rebasing: bytes[line.value])) else { return }
                start = line.lineEnd + 2
            }
        }
    }

    /// What writing fields found out about those it left out or wrote.
    typealias Facts = (hasDate: Bool, declaredLength: String?, sawConnection: Bool)

    /// Writes the end-to-end fields of `headers` (minus those in `named`, lower-case); says
    /// whether there was a `Date`, what `Content-Length` said, and whether a `Connection`
    /// field was seen. (Not generic: it runs for every response.)
    @discardableResult
    static func write(_ headers: HTTPFields, skipping named: [String]?, into buffer: inout ByteBuffer) -> Facts {
        var facts: Facts = (false, nil, false)
        for field in headers {
            write(field, skipping: named, into: &buffer, facts: &facts)
        }
        return facts
    }

    /// ``write(_:skipping:into:)`` for fields in an array.
    @discardableResult
    static func write(_ fields: [HTTPField], into buffer: inout ByteBuffer) -> Facts {
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
