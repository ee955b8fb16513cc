/// The buffering that waits for room in a ``BufferBudget`` (`limits.buffered`), as a value:
/// who waits, for how many bytes, in the order they came. ``BufferBudget`` feeds it its events
/// under a lock and performs what it says; it has no clock (each waiter's deadline is a timer
/// of its caller's event loop, whose firing is ``timedOut(_:)``) and no atomics.
///
/// The queue is bounded (`limits.buffered_waiters`): beyond it, a new waiter is refused at once
/// (503), so that a flood of buffering cannot itself take unbounded memory. Room is handed out
/// first come, first served: a large waiter at the head is not overtaken by smaller ones behind
/// it (each waits at most its deadline, so nobody waits for long).
struct BufferBudgetWaitQueue<Waiter> {
    /// A waiter's name, for its deadline to find it.
    struct ID: Hashable {
        fileprivate let value: UInt64
    }

    private struct Entry {
        let id: ID
        let bytes: Int
        let waiter: Waiter
    }

    /// What ``wait(for:_:)`` decides.
    enum WaitAction {
        /// Queued: the waiter hears when room is granted (``granted(_:)``) or its deadline passes.
        case queued(ID)
        /// The queue is full (or waiting is off): refuse now.
        case refused(Waiter)
    }

    private var entries: [Entry] = []
    private var head = 0
    private var nextID: UInt64 = 0
    /// The most waiters at once (`limits.buffered_waiters`); 0: nobody waits.
    private(set) var capacity: Int

    /// A queue of at most `capacity` waiters.
    init(capacity: Int) {
        self.capacity = max(0, capacity)
    }

    /// How many wait.
    var count: Int { entries.count - head }

    /// A reservation of `bytes` found no room: queue it, if the queue has room.
    mutating func wait(for bytes: Int, _ waiter: Waiter) -> WaitAction {
        guard count < capacity else { return .refused(waiter) }
        let id = ID(value: nextID)
        nextID &+= 1
        entries.append(Entry(id: id, bytes: bytes, waiter: waiter))
        return .queued(id)
    }

    /// How many bytes the waiters that `available` bytes can serve, in order, take together,
    /// and how many they are (the budget takes those bytes, then calls ``granted(_:)``).
    func grantable(available: Int) -> (count: Int, bytes: Int) {
        var bytes = 0
        var served = 0
        var index = head
        while index < entries.count, bytes + entries[index].bytes <= available {
            bytes += entries[index].bytes
            served += 1
            index += 1
        }
        return (served, bytes)
    }

    /// The first `count` waiters got their bytes: out of the queue, to be told.
    mutating func granted(_ count: Int) -> [(Waiter, bytes: Int)] {
        precondition(count <= self.count, "more waiters granted than wait")
        let served = entries[head..<(head + count)].map { ($0.waiter, bytes: $0.bytes) }
        head += count
        compact()
        return served
    }

    /// A waiter's deadline passed: it leaves the queue, to be refused (nil when it was served
    /// already, its timer late).
    mutating func timedOut(_ id: ID) -> Waiter? {
        guard let index = entries[head...].firstIndex(where: { $0.id == id }) else { return nil }
        let waiter = entries[index].waiter
        entries.remove(at: index)
        compact()
        return waiter
    }

    /// A reload set a new bound: those waiting already stay.
    mutating func resize(capacity: Int) {
        self.capacity = max(0, capacity)
    }

    /// Drops what the served entries left at the front, once they are half the storage.
    private mutating func compact() {
        if head == entries.count {
            entries.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 32, head * 2 > entries.count {
            entries.removeFirst(head)
            head = 0
        }
    }
}
