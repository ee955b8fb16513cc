/// Least-recently-used bookkeeping: a dictionary into an array of nodes linked in use
/// order (no allocation per node once warm). Not thread-safe: its owner locks it.
///
/// Slots, links and sizes are 32-bit: a cache holds at most 100 million keys (the bound on
/// `max_entries`), and the smaller node and dictionary values save about 30 bytes a key.
struct LRUIndex<Value> {
    private struct Node {
        var key: String
        var value: Value
        var size: UInt32
        var newer: Int32
        var older: Int32
    }

    private var nodes: [Node?] = []
    private var freeSlots: [Int32] = []
    private var slots: [String: Int32] = [:]
    private var newest: Int32 = -1
    private var oldest: Int32 = -1
    /// The sum of the sizes of all values.
    private(set) var totalSize = 0

    /// How many values it holds.
    var count: Int { slots.count }

    /// The value of `key`, made the most recently used.
    mutating func get(_ key: String) -> Value? {
        guard let slot = slots[key] else { return nil }
        moveToFront(slot)
        return nodes[Int(slot)]!.value
    }

    /// The value of `key` without changing the order.
    func peek(_ key: String) -> Value? {
        slots[key].map { nodes[Int($0)]!.value }
    }

    /// Sets `key` as the most recently used value.
    mutating func set(_ key: String, _ value: Value, size: Int) {
        let size = UInt32(clamping: size)
        if let slot = slots[key] {
            totalSize += Int(size) - Int(nodes[Int(slot)]!.size)
            nodes[Int(slot)]!.value = value
            nodes[Int(slot)]!.size = size
            moveToFront(slot)
            return
        }
        let node = Node(key: key, value: value, size: size, newer: -1, older: newest)
        let slot: Int32
        if let reused = freeSlots.popLast() {
            nodes[Int(reused)] = node
            slot = reused
        } else {
            // Grown by a quarter rather than doubled: a full cache's index then carries at
            // most a quarter of unused nodes, not up to a whole copy's worth.
            if nodes.count == nodes.capacity { nodes.reserveCapacity(nodes.count + nodes.count / 4 + 16) }
            nodes.append(node)
            slot = Int32(nodes.count - 1)
        }
        if newest >= 0 { nodes[Int(newest)]!.newer = slot }
        newest = slot
        if oldest < 0 { oldest = slot }
        slots[key] = slot
        totalSize += Int(size)
    }

    /// Removes `key`; returns its value.
    @discardableResult
    mutating func remove(_ key: String) -> Value? {
        guard let slot = slots.removeValue(forKey: key) else { return nil }
        let node = unlink(slot)
        nodes[Int(slot)] = nil
        freeSlots.append(slot)
        totalSize -= Int(node.size)
        return node.value
    }

    /// Removes and returns the least recently used value.
    mutating func removeOldest() -> (key: String, value: Value)? {
        guard oldest >= 0, let node = nodes[Int(oldest)] else { return nil }
        remove(node.key)
        return (node.key, node.value)
    }

    /// The keys that satisfy `predicate`.
    func keys(where predicate: (String) -> Bool) -> [String] {
        slots.keys.filter(predicate)
    }

    /// The entries held in slots `start..<start + limit` (in no particular order), and the
    /// slot to go on from: a sweep over a large index a chunk at a time, so that its owner's
    /// lock is never held for long. Nil when `start` is past the last slot.
    func chunk(from start: Int, limit: Int) -> (entries: [(key: String, value: Value)], next: Int)? {
        guard start < nodes.count else { return nil }
        let end = min(nodes.count, start + limit)
        var out: [(key: String, value: Value)] = []
        out.reserveCapacity(end - start)
        for slot in start..<end {
            if let node = nodes[slot] { out.append((node.key, node.value)) }
        }
        return (out, end)
    }

    private mutating func moveToFront(_ slot: Int32) {
        guard slot != newest else { return }
        _ = unlink(slot)
        nodes[Int(slot)]!.older = newest
        nodes[Int(slot)]!.newer = -1
        if newest >= 0 { nodes[Int(newest)]!.newer = slot }
        newest = slot
        if oldest < 0 { oldest = slot }
    }

    private mutating func unlink(_ slot: Int32) -> Node {
        let node = nodes[Int(slot)]!
        if node.newer >= 0 { nodes[Int(node.newer)]!.older = node.older } else { newest = node.older }
        if node.older >= 0 { nodes[Int(node.older)]!.newer = node.newer } else { oldest = node.newer }
        return node
    }
}
