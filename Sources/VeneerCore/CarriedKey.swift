/// Who a piece of ``CarriedState`` belongs to, and so what a reload must match to carry it over.
///
/// - ``entry(_:_:)``: the state of one chain entry (a cache's storage). It is kept while the
///   new chain has an entry with the same name and options at the same rank among the
///   identical ones, wherever it stands: adding a decorator elsewhere keeps it, and two
///   identical entries in one chain get two states.
/// - ``shared(_:_:)``: state defined by what it stands for rather than by who uses it (a
///   store, the blocks of a store, a log file, a token for one client at one endpoint):
///   every entry that names the same parts gets the same object.
public struct CarriedKey: Hashable, Sendable, CustomStringConvertible {
    private enum Owner: Hashable, Sendable {
        case entry(ChainEntryIdentity)
        case shared(kind: String)
    }

    private let owner: Owner
    private let parts: [AnySendableHashable]

    /// The state of the chain entry `entry` (``BuildContext/entry``, or
    /// ``BuildContext/entryKey(_:)``). `parts` are what else the state depends on (the
    /// store object a cache writes to): when one changes, the entry gets a fresh state.
    public static func entry(_ entry: ChainEntryIdentity, _ parts: any Hashable & Sendable...) -> CarriedKey {
        CarriedKey(entry: entry, parts: parts)
    }

    init(entry: ChainEntryIdentity, parts: [any Hashable & Sendable]) {
        self.init(owner: .entry(entry), parts: parts.map(AnySendableHashable.init))
    }

    private init(owner: Owner, parts: [AnySendableHashable]) {
        self.owner = owner
        self.parts = parts
    }

    /// State shared by everything that names the same `kind` and `parts`, e.g.
    /// `.shared("store", name, spec)`. The parts appear in the log of a reload: never a secret.
    public static func shared(_ kind: String, _ parts: any Hashable & Sendable...) -> CarriedKey {
        CarriedKey(owner: .shared(kind: kind), parts: parts.map(AnySendableHashable.init))
    }

    /// `cache#0`, `cache#1`, `store(local, sqlite:/var/lib/veneer/x.sqlite)`: for logs (an
    /// entry's options and parts, and object identities, are left out: they only tell
    /// states apart).
    public var description: String {
        switch owner {
        case .entry(let entry):
            return "\(entry.name)#\(entry.occurrence)"
        case .shared(let kind):
            let shown = parts.filter { !($0.base is ObjectIdentifier) }.map { String(describing: $0.base) }
            return "\(kind)(\(shown.joined(separator: ", ")))"
        }
    }
}

/// What identifies an entry of a chain across reloads: its name, its options and its rank
/// among the entries of the chain with the same name and options (0 for the first). The
/// ``ChainBuilder`` of the runtime works it out and gives it to each factory in
/// ``BuildContext/entry``.
public struct ChainEntryIdentity: Hashable, Sendable {
    /// The registered name (`cache`).
    public let name: String
    /// The decoded options (compared by value).
    public let options: AnySendableHashable
    /// How many entries before this one in the chain have the same name and options.
    public let occurrence: Int

    /// Creates an identity.
    public init(name: String, options: AnySendableHashable, occurrence: Int) {
        self.name = name
        self.options = options
        self.occurrence = occurrence
    }

    /// The identity of a context not built by a chain builder (code that calls a factory by hand).
    public static let unplaced = ChainEntryIdentity(name: "", options: AnySendableHashable(""), occurrence: 0)
}

/// A hashable, sendable value of any type, compared by its own `==`.
///
/// `@unchecked`: every value it holds arrived as a `Sendable` one (both initializers take
/// only those); the stored existential merely forgets it, since a conditional cast cannot
/// name the marker protocol.
public struct AnySendableHashable: Hashable, @unchecked Sendable {
    /// The value.
    public let base: any Hashable

    /// Wraps `base`.
    public init(_ base: any Hashable & Sendable) {
        self.base = base
    }

    /// Wraps `value` if its type is `Hashable`.
    public init?(ifHashable value: any Sendable) {
        guard let hashable = value as? any Hashable else { return nil }
        base = hashable
    }

    /// Equal when both hold equal values of the same type.
    public static func == (lhs: AnySendableHashable, rhs: AnySendableHashable) -> Bool {
        AnyHashable(lhs.base) == AnyHashable(rhs.base)
    }

    /// Hashes the value.
    public func hash(into hasher: inout Hasher) {
        AnyHashable(base).hash(into: &hasher)
    }
}
