import HTTPTypes
import Synchronization

// The wire side of ProxyHeaders, for the HTTP/1.1 module only: package-level, so that it is
// no part of VeneerCore's interface (a decorator reads and changes fields, and never sees how
// they travel). It stays here because it is ProxyHeaders' own storage: moving it to the wire
// module would put an existential into every ProxyHeaders and a box into every answer read.

/// Header fields as HTTP/1.1 field lines (`Name: value\r\n`), ready to be copied onto the
/// wire: hop-by-hop fields and `Content-Length` left out, with what the writer needs to know
/// about those left out. The lines are plain data; ``reader`` (of the HTTP/1.1 module)
/// knows how to read fields back out of them.
package struct FieldLines: Sendable {
    // Stored compactly (53 bytes), with the small facts behind computed properties: every
    // cached entry's header storage holds one, and a storage of 88 bytes or less takes one
    // size class of the allocator less.
    /// The lines.
    package let bytes: [UInt8]
    /// A summary of the lines' names that ``reader`` uses to answer most lookups without a scan.
    package let nameBits: UInt64
    /// Reads fields out of the lines.
    package let reader: any FieldLineReader.Type
    /// The value of a `Content-Length` field they stand for but left out.
    package let declaredLength: String?
    private let storedCount: UInt32
    private let flags: UInt8

    /// How many fields they stand for (a `Content-Length` left out included).
    package var count: Int { Int(storedCount) }
    /// Whether one of them is `Date`.
    package var hasDate: Bool { flags & 1 != 0 }
    /// Whether the fields had a `Connection` field: the fields it names must go too, which
    /// the lines do not know, so they cannot be used.
    package var sawConnection: Bool { flags & 2 != 0 }

    /// Lines and what is known of them.
    package init(bytes: [UInt8], count: Int, hasDate: Bool, declaredLength: String?, sawConnection: Bool, nameBits: UInt64,
                reader: any FieldLineReader.Type) {
        self.bytes = bytes
        storedCount = UInt32(clamping: count)
        flags = (hasDate ? 1 : 0) | (sawConnection ? 2 : 0)
        self.declaredLength = declaredLength
        self.nameBits = nameBits
        self.reader = reader
    }

    /// The same lines in an array of their own size (lines read off a connection grow as they
    /// are read, and keep the room they grew into).
    func compacted() -> FieldLines {
        guard bytes.capacity > bytes.count + 16 else { return self }
        let exact = [UInt8](unsafeUninitializedCapacity: bytes.count) { buffer, count in
            count = buffer.initialize(fromContentsOf: bytes)
        }
        return FieldLines(bytes: exact, count: count, hasDate: hasDate, declaredLength: declaredLength, sawConnection: sawConnection,
                          nameBits: nameBits, reader: reader)
    }
}

/// Reads fields out of ``FieldLines`` (implemented by the HTTP/1.1 module, which wrote them).
/// Each answer must be what the fields of ``fields(of:)`` would give.
package protocol FieldLineReader: Sendable {
    /// Every field, in order (a `Content-Length` left out last).
    static func fields(of lines: FieldLines) -> HTTPFields
    /// Whether a field is named `name`.
    static func contains(_ name: HTTPField.Name, in lines: FieldLines) -> Bool
    /// The values of the fields named `name`, in order.
    static func values(_ name: HTTPField.Name, in lines: FieldLines) -> [String]
}

/// The fields that copies of ``ProxyHeaders`` share: the lines of a response read off a
/// connection (made into `HTTPFields` when first asked for, at most once), or fields that many
/// responses carry (a cached entry's, made into lines when first written, at most once).
///
/// Storage made for a cache (``ProxyHeaders/sharedCopy(removing:)``) is compact: it keeps one
/// form only, the lines once they exist, and makes fields anew whenever they are asked for, so
/// that an entry held for hours does not carry both forms.
package final class HeaderStorage: Sendable {
    /// What the storage holds.
    package enum Source: Sendable {
        /// Fields.
        case fields(HTTPFields)
        /// Lines off the wire (or made from fields).
        case lines(FieldLines)
    }

    /// The forms held now. One lock for all: a lookup costs one uncontended lock, and the
    /// storage stays one small object (a cached entry holds one for its whole life; the
    /// fields come first in each case so that both pack into 61 bytes).
    private enum Held: Sendable {
        /// Lines, and the fields once made from them.
        case lines(madeFields: HTTPFields?, FieldLines)
        /// Fields, and the lines once made from them.
        case fields(HTTPFields, madeLines: FieldLines?)
    }

    private let held: Mutex<Held>
    /// Whether forms made on demand are dropped rather than kept (see the type's note).
    private let compact: Bool

    init(_ fields: HTTPFields, compact: Bool = false) {
        held = Mutex(.fields(fields, madeLines: nil))
        self.compact = compact
    }

    init(_ lines: FieldLines, compact: Bool = false) {
        held = Mutex(.lines(madeFields: nil, lines))
        self.compact = compact
    }

    init(_ fields: HTTPFields, lines: FieldLines) {
        held = Mutex(.fields(fields, madeLines: lines))
        compact = false
    }

    /// What it holds: the lines when it has them, else the fields.
    package var source: Source {
        held.withLock { held in
            switch held {
            case .lines(_, let lines), .fields(_, madeLines: let lines?): return .lines(lines)
            case .fields(let fields, madeLines: nil): return .fields(fields)
            }
        }
    }

    /// The lines it was made from or has made, if any, without making them.
    var lines: FieldLines? {
        held.withLock { held in
            switch held {
            case .lines(_, let lines), .fields(_, madeLines: let lines?): return lines
            case .fields(_, madeLines: nil): return nil
            }
        }
    }

    /// The fields (made from the lines the first time, under the lock, then kept unless compact).
    var fields: HTTPFields {
        held.withLock { held in
            switch held {
            case .fields(let fields, _):
                return fields
            case .lines(let made?, _):
                return made
            case .lines(madeFields: nil, let lines):
                let fields = lines.reader.fields(of: lines)
                if !compact { held = .lines(madeFields: fields, lines) }
                return fields
            }
        }
    }

    /// How many fields there are (without making them from lines).
    var count: Int {
        held.withLock { held in
            switch held {
            case .fields(let fields, _): return fields.count
            case .lines(_, let lines): return lines.count
            }
        }
    }

    /// How many bytes the fields take as `Name: value` lines.
    var textSize: Int {
        held.withLock { held in
            switch held {
            case .lines(_, let lines), .fields(_, madeLines: let lines?): return lines.bytes.count
            case .fields(let fields, madeLines: nil): return ProxyHeaders.textSize(of: fields)
            }
        }
    }

    func contains(_ name: HTTPField.Name) -> Bool {
        held.withLock { held in
            switch held {
            case .fields(let fields, _): return fields.contains(name)
            case .lines(let made?, _): return made.contains(name)
            case .lines(madeFields: nil, let lines): return lines.reader.contains(name, in: lines)
            }
        }
    }

    func values(_ name: HTTPField.Name) -> [String] {
        held.withLock { held in
            switch held {
            case .fields(let fields, _): return fields[values: name]
            case .lines(let made?, _): return made[values: name]
            case .lines(madeFields: nil, let lines): return lines.reader.contains(name, in: lines) ? lines.reader.values(name, in: lines) : []
            }
        }
    }

    /// The fields as lines: those it was made from, or those `make` makes of its fields the
    /// first time (kept for every later answer that carries them; compact storage then lets
    /// go of the fields).
    package func lines(orMake make: (HTTPFields) -> FieldLines) -> FieldLines {
        held.withLock { held in
            switch held {
            case .lines(_, let lines), .fields(_, madeLines: let lines?):
                return lines
            case .fields(let fields, madeLines: nil):
                let lines = make(fields)
                held = compact ? .lines(madeFields: nil, lines) : .fields(fields, madeLines: lines)
                return lines
            }
        }
    }
}

extension ProxyHeaders {
    /// How the fields are held, as the writer sees them.
    package enum Wire {
        /// A list of the response's own.
        case fields(HTTPFields)
        /// Shared storage, then fields appended after it.
        case shared(HeaderStorage, appended: [HTTPField])
    }

    /// How the fields are held.
    package var wire: Wire {
        switch base {
        case .owned(let fields): return .fields(fields)
        case .shared(let storage): return .shared(storage, appended: appended)
        }
    }

    /// Fields read off a connection as lines: reading them by name needs no `HTTPField`s,
    /// anything else makes them once.
    package init(lines: FieldLines) {
        self.init(base: .shared(HeaderStorage(lines)))
    }

    /// Fields whose lines were read with them, which must be exactly these fields.
    package init(fields: HTTPFields, lines: FieldLines) {
        self.init(base: .shared(HeaderStorage(fields, lines: lines)))
    }
}

extension ProxyHeaders {
    /// These fields without those named, held as compactly as they can be for the many
    /// answers that will share them (a cached entry's): fields read off a connection stay in the
    /// form they came in, in storage of their own size; other fields are kept until the server
    /// first needs them in its own form, which then replaces them. Either way, fields asked for
    /// later are made anew each time rather than kept.
    public func sharedCopy(removing names: [HTTPField.Name]) -> ProxyHeaders {
        if appended.isEmpty, case .shared(let storage) = base, let lines = storage.lines, !lines.sawConnection,
           !names.contains(where: { lines.reader.contains($0, in: lines) }) {
            return ProxyHeaders(base: .shared(HeaderStorage(lines.compacted(), compact: true)))
        }
        var kept = HTTPFields()
        kept.reserveCapacity(count)
        for field in fields where !names.contains(field.name) { kept.append(field) }
        return ProxyHeaders(base: .shared(HeaderStorage(kept, compact: true)))
    }
}

extension ProxyHeaders {
    /// Roughly how many bytes the fields take as `Name: value` lines, without making any.
    public var textSize: Int {
        switch base {
        case .owned(let fields): return Self.textSize(of: fields)
        case .shared(let storage): return storage.textSize + Self.textSize(of: appended)
        }
    }

    static func textSize(of fields: some Sequence<HTTPField>) -> Int {
        fields.reduce(0) { $0 + $1.name.rawName.utf8.count + $1.value.utf8.count + 4 }
    }
}
