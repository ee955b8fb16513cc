import HTTPTypes
import Synchronization

// The wire side of ProxyHeaders, for the HTTP/1.1 module only (`@_spi(Wire) import
// VeneerCore`): decorators read and change fields, and never see how they travel.

/// Header fields as HTTP/1.1 field lines (`Name: value\r\n`), ready to be copied onto the
/// wire: hop-by-hop fields and `Content-Length` left out, with what the writer needs to know
/// about those left out. The lines are plain data; ``reader`` (of the HTTP/1.1 module)
/// knows how to read fields back out of them.
@_spi(Wire)
public struct FieldLines: Sendable {
    /// The lines.
    public let bytes: [UInt8]
    /// How many fields they stand for (a `Content-Length` left out included).
    public let count: Int
    /// Whether one of them is `Date`.
    public let hasDate: Bool
    /// The value of a `Content-Length` field they stand for but left out.
    public let declaredLength: String?
    /// Whether the fields had a `Connection` field: the fields it names must go too, which
    /// the lines do not know, so they cannot be used.
    public let sawConnection: Bool
    /// A summary of the lines' names that ``reader`` uses to answer most lookups without a scan.
    public let nameBits: UInt64
    /// Reads fields out of the lines.
    public let reader: any FieldLineReader.Type

    /// Lines and what is known of them.
    public init(bytes: [UInt8], count: Int, hasDate: Bool, declaredLength: String?, sawConnection: Bool, nameBits: UInt64,
                reader: any FieldLineReader.Type) {
        self.bytes = bytes
        self.count = count
        self.hasDate = hasDate
        self.declaredLength = declaredLength
        self.sawConnection = sawConnection
        self.nameBits = nameBits
        self.reader = reader
    }
}

/// Reads fields out of ``FieldLines`` (implemented by the HTTP/1.1 module, which wrote them).
/// Each answer must be what the fields of ``fields(of:)`` would give.
@_spi(Wire)
public protocol FieldLineReader: Sendable {
    /// Every field, in order (a `Content-Length` left out last).
    static func fields(of lines: FieldLines) -> HTTPFields
    /// Whether a field is named `name`.
    static func contains(_ name: HTTPField.Name, in lines: FieldLines) -> Bool
    /// The values of the fields named `name`, in order.
    static func values(_ name: HTTPField.Name, in lines: FieldLines) -> [String]
}

/// The fields that copies of ``ProxyHeaders`` share: fields that many responses carry (a
/// cached entry's), or the lines of a response read off a connection, made into
/// `HTTPFields` when first asked for, at most once.
@_spi(Wire)
public final class HeaderStorage: Sendable {
    /// What the storage was made from.
    public enum Source: Sendable {
        /// Fields.
        case fields(HTTPFields)
        /// Lines off the wire.
        case lines(FieldLines)
    }

    /// What it was made from.
    public let source: Source
    /// The fields made from lines, or the lines made from fields, once made.
    private let made: Mutex<(fields: HTTPFields?, lines: FieldLines?)>

    init(_ fields: HTTPFields) {
        source = .fields(fields)
        made = Mutex((nil, nil))
    }

    init(_ lines: FieldLines) {
        source = .lines(lines)
        made = Mutex((nil, nil))
    }

    init(_ fields: HTTPFields, lines: FieldLines) {
        source = .fields(fields)
        made = Mutex((nil, lines))
    }

    /// The fields (made from the lines the first time, under the lock, then kept).
    var fields: HTTPFields {
        switch source {
        case .fields(let fields):
            return fields
        case .lines(let lines):
            return made.withLock { made in
                if let fields = made.fields { return fields }
                let fields = lines.reader.fields(of: lines)
                made.fields = fields
                return fields
            }
        }
    }

    /// How many fields there are (without making them from lines).
    var count: Int {
        switch source {
        case .fields(let fields): return fields.count
        case .lines(let lines): return lines.count
        }
    }

    func contains(_ name: HTTPField.Name) -> Bool {
        switch source {
        case .fields(let fields): return fields.contains(name)
        case .lines(let lines): return lines.reader.contains(name, in: lines)
        }
    }

    func values(_ name: HTTPField.Name) -> [String] {
        switch source {
        case .fields(let fields): return fields[values: name]
        case .lines(let lines): return lines.reader.contains(name, in: lines) ? lines.reader.values(name, in: lines) : []
        }
    }

    /// The fields as lines: those it was made from, or those `make` makes of its fields the
    /// first time (kept for every later answer that carries them).
    public func lines(orMake make: (HTTPFields) -> FieldLines) -> FieldLines {
        switch source {
        case .lines(let lines):
            return lines
        case .fields(let fields):
            return made.withLock { made in
                if let lines = made.lines { return lines }
                let lines = make(fields)
                made.lines = lines
                return lines
            }
        }
    }
}

extension ProxyHeaders {
    /// How the fields are held, as the writer sees them.
    @_spi(Wire)
    public enum Wire {
        /// A list of the response's own.
        case fields(HTTPFields)
        /// Shared storage, then fields appended after it.
        case shared(HeaderStorage, appended: [HTTPField])
    }

    /// How the fields are held.
    @_spi(Wire)
    public var wire: Wire {
        switch base {
        case .owned(let fields): return .fields(fields)
        case .shared(let storage): return .shared(storage, appended: appended)
        }
    }

    /// Fields read off a connection as lines: reading them by name needs no `HTTPField`s,
    /// anything else makes them once.
    @_spi(Wire)
    public init(lines: FieldLines) {
        self.init(base: .shared(HeaderStorage(lines)))
    }

    /// Fields whose lines were read with them, which must be exactly these fields.
    @_spi(Wire)
    public init(fields: HTTPFields, lines: FieldLines) {
        self.init(base: .shared(HeaderStorage(fields, lines: lines)))
    }
}
