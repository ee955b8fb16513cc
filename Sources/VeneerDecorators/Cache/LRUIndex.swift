/// Least-recently-used bookkeeping: a dictionary into an array of nodes linked in use
/// order (no allocation per node once warm). Not thread-safe: its owner locks it.
struct LRUIndex<Value> {
    private struct Node {
        var key: String
        var value: Value
        var size: Int
        var newer: Int
        var older: Int
    }

    private var nodes: [Node?] = []
    private var freeSlots: [Int] = []
    private var slots: [String: Int] = [:]
    private var newest = -1
    private var oldest = -1
    /// The sum of the sizes of all values.
    private(set) var totalSize = 0

    /// How many values it holds.
    var count: Int { slots.count }

    /// The value of `key`, made the most recently used.
    mutating func get(_ key: String) -> Value? {
        guard let slot = slots[key] else { return nil }
        moveToFront(slot)
        return nodes[slot]!.value
    }

    /// The value of `key` without changing the order.
    func peek(_ key: String) -> Value? {
        slots[key].map { nodes[$0]!.value }
    }

    /// Sets `key` as the most recently used value.
    mutating func set(_ key: String, _ value: Value, size: Int) {
        if let slot = slots[key] {
            totalSize += size - nodes[slot]!.size
            nodes[slot]!.value = value
            nodes[slot]!.size = size
            moveToFront(slot)
            return
        }
        let node = Node(key: key, value: value, size: size, newer: -1, older: newest)
        let slot: Int
        if let reused = freeSlots.popLast() {
            nodes[reused] = node
            slot = reused
        } else {
            nodes.append(node)
            slot = nodes.count - 1
        }
        if newest >= 0 { nodes[newest]!.newer = slot }
        newest = slot
        if oldest < 0 { oldest = slot }
        slots[key] = slot
        totalSize += size
    }

    /// Removes `key`; returns its value.
    @discardableResult
    mutating func remove(_ key: String) -> Value? {
        guard let slot = slots.removeValue(forKey: key) else { return nil }
        let node = unlink(slot)
        nodes[slot] = nil
        freeSlots.append(slot)
        totalSize -= node.size
        return node.value
    }

    /// Removes and returns the least recently used value.
    mutating func removeOldest() -> (key: String, value: Value)? {
        guard oldest >= 0, let node = nodes[oldest] else { return nil }
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

    private mutating func moveToFront(_ slot: Int) {
        guard slot != newest else { return }
        _ = unlink(slot)
        nodes[slot]!.older = newest
        nodes[slot]!.newer = -1
        if newest >= 0 { nodes[newest]!.newer = slot }
        newest = slot
        if oldest < 0 { oldest = slot }
    }

    private mutating func unlink(_ slot: Int) -> Node {
        let node = nodes[slot]!
        if node.newer >= 0 { nodes[node.newer]!.older = node.older } else { newest = node.older }
        if node.older >= 0 { nodes[node.older]!.newer = node.newer } else { oldest = node.newer }
        return node
    }
}
