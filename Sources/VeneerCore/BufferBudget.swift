import Synchronization

/// The one memory budget for what is buffered whole across every connection of an instance
/// (`limits.buffered`): request bodies read before the chain sees them, and answers a
/// decorator reads whole (``ProxyResponse/collected(upTo:)``). Bodies that stream are not
/// buffered and take nothing from it. Beyond it, new buffering is refused (503 `overloaded`)
/// rather than allowed to exhaust memory, whatever the mix of traffic.
///
/// A ``Reservation`` holds its bytes until it goes (its `deinit` gives them back), so a body
/// cannot keep its share after it is gone, whichever way its request ended.
public final class BufferBudget: Sendable {
    private let used = Atomic<Int>(0)
    private let bound: Atomic<Int>

    /// A budget of `limit` bytes.
    public init(limit: Int) {
        bound = Atomic(limit)
    }

    /// The most bytes reserved at once.
    public var limit: Int { bound.load(ordering: .relaxed) }

    /// Sets the limit (a reload's `limits.buffered`); what is reserved already stays.
    public func resize(to limit: Int) {
        bound.store(limit, ordering: .relaxed)
    }

    /// No bound (code that builds chains by hand, tests).
    public static let unbounded = BufferBudget(limit: .max)

    /// Bytes reserved now.
    public var inUse: Int { used.load(ordering: .relaxed) }

    /// Reserves `bytes`, if the budget has room for them.
    public func reserve(_ bytes: Int) -> Reservation? {
        guard take(bytes) else { return nil }
        return Reservation(budget: self, bytes: bytes)
    }

    fileprivate func take(_ bytes: Int) -> Bool {
        guard bytes > 0 else { return true }
        var current = used.load(ordering: .relaxed)
        let limit = limit
        while current <= limit - bytes {
            let (exchanged, original) = used.compareExchange(expected: current, desired: current + bytes, ordering: .relaxed)
            if exchanged { return true }
            current = original
        }
        return false
    }

    fileprivate func give(_ bytes: Int) {
        if bytes > 0 { used.subtract(bytes, ordering: .relaxed) }
    }

    /// Bytes reserved from a ``BufferBudget``, given back when it goes.
    public final class Reservation: Sendable {
        private let budget: BufferBudget
        private let bytes = Atomic<Int>(0)

        fileprivate init(budget: BufferBudget, bytes: Int) {
            self.budget = budget
            self.bytes.store(bytes, ordering: .relaxed)
        }

        /// Reserves `more` bytes on top, if the budget has room.
        public func grow(by more: Int) -> Bool {
            guard budget.take(more) else { return false }
            bytes.add(more, ordering: .relaxed)
            return true
        }

        /// The bytes held.
        public var held: Int { bytes.load(ordering: .relaxed) }

        deinit {
            budget.give(bytes.load(ordering: .relaxed))
        }
    }
}
