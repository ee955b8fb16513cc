/// Least-recently-used bookkeeping: an array of nodes linked in use order (no allocation per
/// node once warm), found through an open-addressing table of slot numbers. Not thread-safe:
/// its owner locks it.
///
/// Slots and links are 32-bit: a cache holds at most 100 million keys (the bound on
/// `max_entries`), and the smaller node and table save about 30 bytes a key. The key lives in
/// its node only: the table holds 4-byte slot numbers and compares against the nodes' keys,
/// where a `[String: Int32]` would keep a second copy of every key and cost 20 bytes a bucket
/// (about 40 to 50 bytes a key at a dictionary's load), against 5 to 11 here. A value's size
/// is asked of the value (an immutable entry's, worked out once) rather than kept in its node:
/// a node of 32 bytes rather than 40.
struct LRUIndex<Value: LRUSized> {
    private struct Node {
        var key: String
        var value: Value
        var newer: Int32
        var older: Int32
    }

    private var nodes: [Node?] = []
    private var freeSlots: [Int32] = []
    /// Slot numbers by the key's hash, linear probing, -1 for an empty bucket; a power of two
    /// long (or empty), at most three quarters full.
    private var table: [Int32] = []
    private var newest: Int32 = -1
    private var oldest: Int32 = -1
    /// How many values it holds.
    private(set) var count = 0
    /// The sum of the sizes of all values.
    private(set) var totalSize = 0

    /// The value of `key`, made the most recently used.
    mutating func get(_ key: String) -> Value? {
        guard let slot = find(key).slot else { return nil }
        moveToFront(slot)
        return nodes[Int(slot)]!.value
    }

    /// The value of `key` without changing the order.
    func peek(_ key: String) -> Value? {
        find(key).slot.map { nodes[Int($0)]!.value }
    }

    /// Sets `key` as the most recently used value.
    mutating func set(_ key: String, _ value: Value) {
        if let slot = find(key).slot {
            totalSize += value.size - nodes[Int(slot)]!.value.size
            nodes[Int(slot)]!.value = value
            moveToFront(slot)
            return
        }
        if (count + 1) * 4 > table.count * 3 { grow() }
        let node = Node(key: key, value: value, newer: -1, older: newest)
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
        table[find(key).bucket] = slot
        count += 1
        totalSize += value.size
    }

    /// Removes `key`; returns its value.
    @discardableResult
    mutating func remove(_ key: String) -> Value? {
        let (bucket, found) = find(key)
        guard let slot = found else { return nil }
        removeBucket(bucket)
        let node = unlink(slot)
        nodes[Int(slot)] = nil
        freeSlots.append(slot)
        count -= 1
        totalSize -= node.value.size
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
        nodes.compactMap { node in node.flatMap { predicate($0.key) ? $0.key : nil } }
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

    // MARK: - The table

    private func home(of key: String) -> Int {
        key.hashValue & (table.count - 1)
    }

    /// The bucket that holds `key`'s slot, or the empty bucket where it would go.
    private func find(_ key: String) -> (bucket: Int, slot: Int32?) {
        guard !table.isEmpty else { return (0, nil) }
        let mask = table.count - 1
        var bucket = home(of: key)
        while true {
            let slot = table[bucket]
            if slot < 0 { return (bucket, nil) }
            if nodes[Int(slot)]!.key == key { return (bucket, slot) }
            bucket = (bucket + 1) & mask
        }
    }

    /// Empties `bucket` and moves later members of its run back (backward-shift deletion),
    /// so that lookups stop at the first empty bucket and no tombstones pile up.
    private mutating func removeBucket(_ bucket: Int) {
        let mask = table.count - 1
        var hole = bucket
        var next = (bucket + 1) & mask
        while table[next] >= 0 {
            let wanted = home(of: nodes[Int(table[next])]!.key)
            // Moved into the hole unless its home lies in (hole, next], cyclically.
            let stays = hole <= next ? (wanted > hole && wanted <= next) : (wanted > hole || wanted <= next)
            if !stays {
                table[hole] = table[next]
                hole = next
            }
            next = (next + 1) & mask
        }
        table[hole] = -1
    }

    private mutating func grow() {
        table = [Int32](repeating: -1, count: max(16, table.count * 2))
        let mask = table.count - 1
        for (index, node) in nodes.enumerated() {
            guard let node else { continue }
            var bucket = home(of: node.key)
            while table[bucket] >= 0 { bucket = (bucket + 1) & mask }
            table[bucket] = Int32(index)
        }
    }

    // MARK: - The use order

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

/// A value an ``LRUIndex`` holds: its size never changes while it is held.
protocol LRUSized {
    /// What it occupies, for the index's ``LRUIndex/totalSize``.
    var size: Int { get }
}
