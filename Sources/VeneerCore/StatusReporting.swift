import Synchronization

/// One live figure a handler shows on the status page (`GET /-/`, `GET /-/status`): a
/// counter, a size, a ratio, a token's expiry.
public struct StatusFigure: Sendable, Equatable {
    /// A short name (`hits`, `entries`, `token_expires_in_seconds`).
    public let name: String
    /// Its value: a number, a string, or null when there is none (no token held yet).
    public let value: JSONValue

    /// A figure.
    public init(_ name: String, _ value: JSONValue) {
        self.name = name
        self.value = value
    }

    /// A counter.
    public init(_ name: String, _ count: Int) {
        self.init(name, .int(count))
    }
}

/// A handler that can say how it is doing, for the status page: the cache its hits and
/// size, auth_refresh its refreshes and the token's expiry, block_list its blocks, fault the
/// faults it injected. An optional capability: the status page shows any other handler as
/// a box with its name only.
///
/// Counters count from the moment the object holding them was made: state a reload carries
/// over (a cache's storage, a token manager, learned blocks) keeps its counts; a decorator
/// built afresh starts again at zero.
public protocol StatusReporting: Sendable {
    /// The figures, in the order they are shown.
    func statusFigures() async -> [StatusFigure]
}

/// A handful of named counters, counted without a lock (relaxed atomics: a status page
/// needs no ordering between them), for ``StatusReporting``.
public final class StatusTally: Sendable {
    /// One counter.
    private final class Slot: Sendable {
        let value = Atomic<Int>(0)
    }

    /// The counters' names, in the order ``figures`` lists them.
    public let names: [String]
    private let slots: [Slot]

    /// Counters called `names`, all zero.
    public init(_ names: [String]) {
        self.names = names
        slots = names.map { _ in Slot() }
    }

    /// Adds `amount` to the counter called `name` (a name it does not have is ignored).
    @inline(__always)
    public func add(_ name: String, _ amount: Int = 1) {
        // A few names: a linear search of short strings is cheaper than hashing one.
        for index in names.indices where names[index] == name {
            slots[index].value.wrappingAdd(amount, ordering: .relaxed)
            return
        }
    }

    /// The counter called `name` (0 for a name it does not have).
    public subscript(name: String) -> Int {
        guard let index = names.firstIndex(of: name) else { return 0 }
        return slots[index].value.load(ordering: .relaxed)
    }

    /// Every counter, as figures.
    public var figures: [StatusFigure] {
        zip(names, slots).map { StatusFigure($0, $1.value.load(ordering: .relaxed)) }
    }
}
