import NIOCore
import Synchronization

/// The one memory budget for what is buffered whole across every connection of an instance
/// (`limits.buffered`): request bodies read before the chain sees them, upstream answers read
/// whole, answers a decorator reads whole (``ProxyResponse/collected(upTo:budget:)``) and the
/// copies `cache` and `record` keep of streamed answers. Bodies that stream are not buffered
/// and take nothing from it. Beyond it, new buffering waits briefly for room
/// (`limits.buffered_wait`, at most `limits.buffered_waiters` at once, in a
/// ``BufferBudgetWaitQueue``) and is then refused (503 `overloaded`) rather than allowed to
/// exhaust memory, whatever the mix of traffic.
///
/// A ``Reservation`` holds its bytes until it goes (its `deinit` gives them back), so a body
/// cannot keep its share after it is gone, whichever way its request ended.
public final class BufferBudget: Sendable {
    private let used = Atomic<Int>(0)
    private let highest = Atomic<Int>(0)
    private let bound: Atomic<Int>
    private let waitNanoseconds: Atomic<Int64>
    /// How many wait (``BufferBudgetWaitQueue/count``), read without the lock when bytes are given back.
    private let waiting = Atomic<Int>(0)
    private let queue: Mutex<BufferBudgetWaitQueue<Waiter>>

    /// Who waits for room: told on its loop whether its bytes were taken.
    private struct Waiter: Sendable {
        let loop: any EventLoop
        let done: @Sendable (Bool) -> Void
    }

    /// The longest wait for room when `wait` is not given (`limits.buffered_wait`).
    public static let defaultWait = Duration.milliseconds(100)
    /// The most waiters at once when `waiters` is not given (`limits.buffered_waiters`).
    public static let defaultWaiters = 1024

    /// A budget of `limit` bytes; buffering beyond it waits up to `wait`, `waiters` of it at once.
    public init(limit: Int, wait: Duration = BufferBudget.defaultWait, waiters: Int = BufferBudget.defaultWaiters) {
        bound = Atomic(limit)
        waitNanoseconds = Atomic(Self.nanoseconds(wait))
        queue = Mutex(BufferBudgetWaitQueue(capacity: waiters))
    }

    /// The most bytes reserved at once.
    public var limit: Int { bound.load(ordering: .relaxed) }

    /// The longest a reservation waits for room.
    public var wait: Duration { .nanoseconds(waitNanoseconds.load(ordering: .relaxed)) }

    /// Sets the limit (a reload's `limits.buffered`); what is reserved already stays.
    public func resize(to limit: Int) {
        bound.store(limit, ordering: .relaxed)
        grantWaiters()
    }

    /// Sets the limit, the longest wait and the most waiters (a reload's `limits`).
    public func resize(to limit: Int, wait: Duration, waiters: Int) {
        waitNanoseconds.store(Self.nanoseconds(wait), ordering: .relaxed)
        queue.withLock { $0.resize(capacity: waiters) }
        resize(to: limit)
    }

    /// No bound (code that builds chains by hand, tests).
    public static let unbounded = BufferBudget(limit: .max)

    /// Bytes reserved now.
    public var inUse: Int { used.load(ordering: .relaxed) }

    /// The most bytes ever reserved at once (the status page's and the metrics' figure: it
    /// never exceeds the limit as it was when they were reserved).
    public var peak: Int { highest.load(ordering: .relaxed) }

    /// Reservations waiting for room now.
    public var waiters: Int { waiting.load(ordering: .relaxed) }

    /// Reserves `bytes`, if the budget has room for them now.
    public func reserve(_ bytes: Int) -> Reservation? {
        guard take(bytes) else { return nil }
        return Reservation(budget: self, bytes: bytes)
    }

    /// Reserves `bytes`, waiting for room up to ``wait``: `done` gets the reservation, or nil
    /// (no room in time, or too many wait already), on `loop`, possibly at once.
    public func reserve(_ bytes: Int, waitingOn loop: any EventLoop, then done: @escaping @Sendable (Reservation?) -> Void) {
        take(bytes, waitingOn: loop) { taken in
            done(taken ? Reservation(budget: self, bytes: bytes) : nil)
        }
    }

    fileprivate func take(_ bytes: Int) -> Bool {
        guard bytes > 0 else { return true }
        var current = used.load(ordering: .relaxed)
        let limit = limit
        while current <= limit - bytes {
            let (exchanged, original) = used.compareExchange(expected: current, desired: current + bytes, ordering: .relaxed)
            if exchanged {
                highest.max(current + bytes, ordering: .relaxed)
                return true
            }
            current = original
        }
        return false
    }

    /// Takes `bytes` now or once room is given back, within ``wait``; `done` hears which, on `loop`.
    fileprivate func take(_ bytes: Int, waitingOn loop: any EventLoop, then done: @escaping @Sendable (Bool) -> Void) {
        if take(bytes) {
            Self.tell(loop, done, true)
            return
        }
        let wait = wait
        let action: BufferBudgetWaitQueue<Waiter>.WaitAction? = queue.withLock { queue in
            // Room given back since the attempt above found none is seen here, or by the
            // giver's grantWaiters once this waiter is queued (both under the lock).
            if take(bytes) { return nil }
            guard wait > .zero else { return .refused(Waiter(loop: loop, done: done)) }
            defer { waiting.store(queue.count, ordering: .relaxed) }
            return queue.wait(for: bytes, Waiter(loop: loop, done: done))
        }
        switch action {
        case nil:
            Self.tell(loop, done, true)
        case .refused(let waiter)?:
            Self.tell(waiter.loop, waiter.done, false)
        case .queued(let id)?:
            loop.scheduleTask(in: TimeAmount(wait)) { [self] in
                let waiter = queue.withLock { queue in
                    defer { waiting.store(queue.count, ordering: .relaxed) }
                    return queue.timedOut(id)
                }
                waiter?.done(false)
            }
        }
    }

    fileprivate func give(_ bytes: Int) {
        guard bytes > 0 else { return }
        used.subtract(bytes, ordering: .relaxed)
        if waiting.load(ordering: .relaxed) > 0 { grantWaiters() }
    }

    /// Hands the room there is to the waiters at the head of the queue.
    private func grantWaiters() {
        let served: [(Waiter, bytes: Int)] = queue.withLock { queue in
            defer { waiting.store(queue.count, ordering: .relaxed) }
            while true {
                let current = used.load(ordering: .relaxed)
                let (count, bytes) = queue.grantable(available: limit - current)
                guard count > 0 else { return [] }
                if used.compareExchange(expected: current, desired: current + bytes, ordering: .relaxed).exchanged {
                    highest.max(current + bytes, ordering: .relaxed)
                    return queue.granted(count)
                }
            }
        }
        for (waiter, _) in served { Self.tell(waiter.loop, waiter.done, true) }
    }

    private static func tell(_ loop: any EventLoop, _ done: @escaping @Sendable (Bool) -> Void, _ taken: Bool) {
        if loop.inEventLoop { done(taken) } else { loop.execute { done(taken) } }
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return max(0, seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }

    /// Bytes reserved from a ``BufferBudget``, given back when it goes.
    public final class Reservation: Sendable {
        private let budget: BufferBudget
        private let bytes = Atomic<Int>(0)

        fileprivate init(budget: BufferBudget, bytes: Int) {
            self.budget = budget
            self.bytes.store(bytes, ordering: .relaxed)
        }

        /// Reserves `more` bytes on top, if the budget has room now.
        public func grow(by more: Int) -> Bool {
            guard budget.take(more) else { return false }
            bytes.add(more, ordering: .relaxed)
            return true
        }

        /// Reserves `more` bytes on top, waiting for room as ``BufferBudget/reserve(_:waitingOn:then:)``
        /// does; `done` hears whether they were reserved, on `loop`.
        public func grow(by more: Int, waitingOn loop: any EventLoop, then done: @escaping @Sendable (Bool) -> Void) {
            budget.take(more, waitingOn: loop) { [self] taken in
                if taken { bytes.add(more, ordering: .relaxed) }
                done(taken)
            }
        }

        /// The bytes held.
        public var held: Int { bytes.load(ordering: .relaxed) }

        deinit {
            budget.give(bytes.load(ordering: .relaxed))
        }
    }
}
