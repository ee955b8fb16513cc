import HTTPTypes

/// The header fields of a ``ProxyResponse``: read and changed like `HTTPFields`, which is
/// what they are, but stored so that the two hot paths copy nothing they need not.
///
/// - Fields that many answers share (a cached entry's, ``init(shared:)``) or that came off an
///   upstream connection live in one storage that copies share; appending (`Age`,
///   `Cache-Status`, `X-Request-Id`) keeps the appended fields apart instead of copying it.
/// - Any other change makes a list of this value's own, once.
///
/// Every reading agrees with every other: `headers[name]`, `headers[values: name]`,
/// ``contains(_:)``, iteration and ``fields`` all see the stored fields followed by the
/// appended ones, as one `HTTPFields` would.
public struct ProxyHeaders: Sendable {
    enum Base: Sendable {
        /// A list of this value's own (never with appended fields).
        case owned(HTTPFields)
        /// Storage that copies share, followed by ``ProxyHeaders/appended``.
        case shared(HeaderStorage)
    }

    var base: Base
    /// Fields appended after shared storage, kept apart so that the storage is not copied.
    var appended: [HTTPField]

    init(base: Base) {
        self.base = base
        appended = []
    }

    /// No fields.
    public init() {
        self.init(base: .owned(HTTPFields()))
    }

    /// These fields, as a list of this value's own.
    public init(_ fields: HTTPFields) {
        self.init(base: .owned(fields))
    }

    /// Fields that many responses will carry (a cached entry's): copies share one storage,
    /// and what the server makes of them for the wire is made once and kept with it.
    public init(shared fields: HTTPFields) {
        self.init(base: .shared(HeaderStorage(fields)))
    }

    /// The fields as one `HTTPFields`: the stored ones, then the appended ones.
    public var fields: HTTPFields {
        switch base {
        case .owned(let fields):
            return fields
        case .shared(let storage):
            guard !appended.isEmpty else { return storage.fields }
            var fields = storage.fields
            fields.append(contentsOf: appended)
            return fields
        }
    }

    /// The values of the fields named `name` joined as `HTTPFields` joins them (`, `, or `; `
    /// for `Cookie`), or nil when there is none. Setting replaces every field of that name
    /// (the first keeps its place, as in `HTTPFields`); nil removes them.
    public subscript(name: HTTPField.Name) -> String? {
        get {
            switch base {
            case .owned(let fields):
                return fields[name]
            case .shared(let storage):
                if !appended.isEmpty, !storage.contains(name) {
                    // A field appended after the stored ones (a hit's Cache-Status, Age), or
                    // none: read without making a list of values.
                    guard let first = appended.firstIndex(where: { $0.name == name }) else { return nil }
                    if !appended[(first + 1)...].contains(where: { $0.name == name }) { return appended[first].value }
                }
                let values = appended.isEmpty ? storage.values(name) : self[values: name]
                guard !values.isEmpty else { return nil }
                return values.joined(separator: name == .cookie ? "; " : ", ")
            }
        }
        set {
            withOwnedFields { $0[name] = newValue }
        }
    }

    /// The values of the fields named `name`, in order. Setting replaces them.
    public subscript(values name: HTTPField.Name) -> [String] {
        get {
            switch base {
            case .owned(let fields):
                return fields[values: name]
            case .shared(let storage):
                var values = storage.values(name)
                for field in appended where field.name == name { values.append(field.value) }
                return values
            }
        }
        set {
            withOwnedFields { $0[values: name] = newValue }
        }
    }

    /// Whether a field is named `name` (for fields read off a connection, without making them).
    public func contains(_ name: HTTPField.Name) -> Bool {
        switch base {
        case .owned(let fields):
            return fields.contains(name)
        case .shared(let storage):
            return storage.contains(name) || appended.contains { $0.name == name }
        }
    }

    /// Appends a field after the others; shared storage stays shared. The field is taken,
    /// not copied (a copy retained its texts, and the caller's was then destroyed: three per
    /// cache hit).
    public mutating func append(_ field: consuming HTTPField) {
        switch base {
        case .owned:
            withOwnedFields { $0.append(copy field) }
        case .shared:
            // Age, Cache-Status, X-Request-Id: room for the usual few at once.
            if appended.isEmpty { appended.reserveCapacity(4) }
            appended.append(field)
        }
    }

    /// How many fields there are.
    public var count: Int {
        switch base {
        case .owned(let fields): return fields.count
        case .shared(let storage): return storage.count + appended.count
        }
    }

    /// Whether there are none.
    public var isEmpty: Bool { count == 0 }

    /// Runs `change` on a list of this value's own: shared storage and the appended fields
    /// become one list first (once; later changes reuse it).
    private mutating func withOwnedFields<Result>(_ change: (inout HTTPFields) -> Result) -> Result {
        var fields: HTTPFields
        switch base {
        case .owned(let owned):
            fields = owned
        case .shared(let storage):
            fields = storage.fields
            fields.append(contentsOf: appended)
            appended = []
        }
        // Let go of the list in `base` so that changing `fields` does not copy it.
        base = .owned(HTTPFields())
        defer { base = .owned(fields) }
        return change(&fields)
    }
}

extension ProxyHeaders: Sequence {
    /// The fields in order: the stored ones, then the appended ones.
    public func makeIterator() -> HTTPFields.Iterator {
        fields.makeIterator()
    }
}

extension ProxyHeaders: ExpressibleByDictionaryLiteral {
    /// Fields from a literal, in order.
    public init(dictionaryLiteral elements: (HTTPField.Name, String)...) {
        var fields = HTTPFields()
        fields.reserveCapacity(elements.count)
        for (name, value) in elements { fields.append(HTTPField(name: name, value: value)) }
        self.init(fields)
    }
}

extension ProxyHeaders: Equatable {
    /// Equal when the fields are, as `HTTPFields` compares them.
    public static func == (lhs: ProxyHeaders, rhs: ProxyHeaders) -> Bool {
        lhs.fields == rhs.fields
    }
}

extension ProxyHeaders: CustomDebugStringConvertible {
    /// The fields.
    public var debugDescription: String { fields.debugDescription }
}
