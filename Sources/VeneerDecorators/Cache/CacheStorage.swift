import CoreMetrics
import Foundation
import HTTPTypes
import Logging
import NIOCore
import Synchronization
import VeneerConfig
import VeneerCore

/// What a cache holds, apart from the decorator so that a reload with the same options
/// keeps it warm: an LRU memory tier (the hot path), an optional persistent tier (a
/// `sqlite` or `postgres` store) behind it, and the requests in flight for coalescing.
final class CacheStorage: CarriedService {
    /// The response variants of one key being worked on (stored as ``StoredVariants``).
    typealias Variants = [CacheEntry]

    static let namespace = "cache"
    static let maxVariants = 8
    /// Entries looked at per turn of the purge.
    static let purgeChunk = 256

    private struct State {
        var memory = LRUIndex<StoredVariants>()
        var flights: [String: Flight] = [:]
        /// Counts removals (local invalidations and those other instances announce), so that
        /// a read of the persistent tier that raced with one does not bring the old copy back.
        var removals: UInt64 = 0
    }

    private let state = Mutex(State())
    /// Recent entries' header fields, which later entries with the same fields share (a lock of
    /// their own: the memory tier's, which every hit takes, is not held for them).
    private let heads = Mutex(SharedHeadersPool())
    let persistent: (any KeyValueStore)?
    private let queue = SerialQueue()
    let maxEntries: Int
    let maxBytes: Int
    /// The free space the persistent tier leaves on its disk (`min_free`).
    let minFree: Int
    let clock: any VeneerClock
    let metrics: CacheMetrics
    let logger: Logger
    /// Whether the disk is below `min_free` with nothing left to evict (said once in the log).
    private let floorBroken = Mutex(false)

    init(maxEntries: Int, maxBytes: Int, minFree: Int = 0, persistent: (any KeyValueStore)?, clock: any VeneerClock, metrics: CacheMetrics,
         logger: Logger) {
        self.maxEntries = maxEntries
        self.maxBytes = maxBytes
        self.minFree = minFree
        self.persistent = persistent
        self.clock = clock
        self.metrics = metrics
        self.logger = logger
    }

    // MARK: Lookup and store

    /// What a lookup found for a request: the entry to answer from, or why there is none
    /// (`uri-miss`, `vary-miss`, or `partial` when only parts of a response are stored).
    struct Selection {
        let entry: CacheEntry?
        let missReason: String

        static let uriMiss = Selection(entry: nil, missReason: "uri-miss")
    }

    /// The stored variant for these request headers in the memory tier, without suspending;
    /// nil when it holds nothing for `key`. (Then ``persistentLookup(_:request:range:)``.)
    func memoryLookup(_ key: String, request: HTTPFields, range: RangeRequest?) -> Selection? {
        guard let variants = state.withLock({ $0.memory.get(key) }) else { return nil }
        return Self.pick(variants, request, range: range)
    }

    /// The stored variant from the persistent tier (then kept in memory); a miss without one.
    func persistentLookup(_ key: String, request: HTTPFields, range: RangeRequest?) async -> Selection {
        guard let variants = await persistentVariants(key) else { return .uriMiss }
        return Self.pick(variants, request, range: range)
    }

    /// Whether anything is stored under `key`, in either tier.
    func holds(_ key: String) async -> Bool {
        if state.withLock({ $0.memory.peek(key) }) != nil { return true }
        return await persistentVariants(key) != nil
    }

    private func persistentVariants(_ key: String) async -> StoredVariants? {
        guard let persistent else { return nil }
        let now = clock.now()
        let removalsBefore = state.withLock { $0.removals }
        let stored: StoredValue? = await queue.run { [logger] in
            do {
                return try await persistent.get(Self.namespace, key, now: now)
            } catch {
                logger.warning("cache store read failed; treating as a miss", metadata: ["store": .string(persistent.description), "error": .string(ErrorText.describe(error))])
                return nil
            }
        }
        guard let stored, let decoded = Self.decode(stored.bytes), let variants = StoredVariants(decoded) else { return nil }
        state.withLock { state in
            if state.memory.peek(key) == nil, state.removals == removalsBefore { state.memory.set(key, variants) }
        }
        enforceBounds()
        return variants
    }

    /// The variant that answers a request: a complete response whose Vary values match, or,
    /// for a request of one range, a stored part that holds the whole range (RFC 9111 §3.3).
    static func pick(_ variants: StoredVariants, _ request: HTTPFields, range: RangeRequest?) -> Selection {
        var partial = false
        for entry in variants where entry.matches(request) {
            guard let part = entry.part else { return Selection(entry: entry, missReason: "") }
            partial = true
            if let wanted = range?.resolve(length: part.complete), wanted.lowerBound >= part.first,
               wanted.upperBound < part.first + entry.body.readableBytes {
                return Selection(entry: entry, missReason: "")
            }
        }
        return Selection(entry: nil, missReason: partial ? "partial" : "vary-miss")
    }

    /// Stores a response variant, replacing the one with the same `Vary` values. A part of a
    /// response is combined with the stored parts of the same variant that share its strong
    /// validator and length (RFC 9111 §3.4), into the complete response once they cover it.
    func store(_ key: String, _ entry: CacheEntry) {
        var entry = entry
        if let shared = heads.withLock({ $0.sharing(entry.headers) }) { entry = entry.sharing(shared) }
        let variants: Variants = state.withLock { state in
            var variants = state.memory.peek(key)?.entries ?? []
            var incoming = [entry]
            if let part = entry.part {
                let tag = entry.strongETag
                if variants.contains(where: { $0.sameVariant(as: entry) && $0.isComplete && tag != nil && $0.strongETag == tag }) {
                    incoming = []  // the complete response is already stored
                } else {
                    let siblings = variants.filter { $0.sameVariant(as: entry) && $0.part?.complete == part.complete && tag != nil && $0.strongETag == tag }
                    incoming = Self.combine(entry, with: siblings)
                }
            }
            if !incoming.isEmpty {
                variants.removeAll { $0.sameVariant(as: entry) }
                variants.insert(contentsOf: incoming, at: 0)
            }
            if variants.count > Self.maxVariants { variants.removeLast(variants.count - Self.maxVariants) }
            if let stored = StoredVariants(variants) { state.memory.set(key, stored) }
            return variants
        }
        enforceBounds()
        guard let persistent else { return }
        let bytes = Self.encode(variants)
        let expiry = variants.map(\.discardAfter).max()
        queue.enqueue { [self] in
            await write(key, StoredValue(bytes: bytes, expiresAt: expiry), to: persistent)
        }
    }

    // MARK: The disk's floor

    /// What a write of `size` bytes may take on the disk: the write-ahead log, then the
    /// database file, and pages around them.
    static func footprint(_ size: Int) -> Int { 2 * size + (64 << 10) }

    /// Writes to the persistent tier without taking the disk below `min_free`: room is made
    /// first (the oldest entries leave the store), and an entry that still does not fit stays
    /// in memory only. A write that fails while space is short makes room and is tried once more.
    private func write(_ key: String, _ value: StoredValue, to persistent: any KeyValueStore) async {
        let needed = Self.footprint(value.bytes.count)
        if let free = persistent.freeSpace(), free - needed < minFree {
            // Nothing of the cache's was left to remove last time: memory only, until
            // ``keepFloor()`` finds the disk above the floor again.
            if floorBroken.withLock({ $0 }) { return }
            guard await makeRoom(in: persistent, until: minFree + needed) else {
                noteFloor(broken: true, persistent)
                return
            }
        }
        do {
            try await persistent.put(Self.namespace, key, value, durable: false)
            return
        } catch {
            guard let free = persistent.freeSpace(), free - needed < minFree + Self.footprint(0) else {
                logger.warning("cache store write failed", metadata: ["store": .string(persistent.description), "error": .string(ErrorText.describe(error))])
                return
            }
            // Out of space (someone else filled the disk, or the estimate fell short).
            logger.notice("cache store write failed for space; making room", metadata: [
                "store": .string(persistent.description), "error": .string(ErrorText.describe(error)),
            ])
        }
        guard await makeRoom(in: persistent, until: minFree + needed) else {
            noteFloor(broken: true, persistent)
            return
        }
        do {
            try await persistent.put(Self.namespace, key, value, durable: false)
        } catch {
            logger.warning("cache store write failed", metadata: ["store": .string(persistent.description), "error": .string(ErrorText.describe(error))])
        }
    }

    /// Evicts the oldest entries of the persistent tier and gives their space back to the
    /// file system until `target` bytes are free; false when they cannot be.
    private func makeRoom(in persistent: any KeyValueStore, until target: Int) async -> Bool {
        var removed = 0
        var round = 0
        while let free = persistent.freeSpace(), free < target {
            // Rows take more room on disk than their values: ask for more each round.
            let wanted = min(target - free, Int.max >> 5) << min(round, 4)
            round += 1
            let evicted: Int
            do {
                evicted = try await persistent.evict(Self.namespace, bytes: wanted)
            } catch {
                logger.warning("cache store eviction failed", metadata: ["store": .string(persistent.description), "error": .string(ErrorText.describe(error))])
                evicted = 0
            }
            removed += evicted
            await persistent.releaseSpace()
            if evicted == 0 {
                break
            }
        }
        if removed > 0 {
            metrics.evicted(removed, reason: "min_free")
            logger.debug("cache entries removed from the store to keep min_free on its disk", metadata: [
                "store": .string(persistent.description), "removed": .stringConvertible(removed),
                "free": .string(persistent.freeSpace().map { Units.format(bytes: $0) } ?? "unknown"),
            ])
        }
        return (persistent.freeSpace() ?? Int.max) >= target
    }

    /// Keeps `min_free` on the disk whatever filled it: what the cache holds there leaves
    /// first, so that what shares the disk (the token store) can write again.
    func keepFloor() async {
        guard let persistent, let free = persistent.freeSpace() else { return }
        guard free < minFree else {
            // With some room to spare, or every write would find it broken again.
            if free >= minFree + Self.footprint(1 << 20) { noteFloor(broken: false, persistent) }
            return
        }
        await queue.run { [self] in
            let kept = await makeRoom(in: persistent, until: minFree)
            noteFloor(broken: !kept, persistent)
        }
    }

    private func noteFloor(broken: Bool, _ persistent: any KeyValueStore) {
        let changed = floorBroken.withLock { state in
            defer { state = broken }
            return state != broken
        }
        guard changed else { return }
        let free = persistent.freeSpace().map { Units.format(bytes: $0) } ?? "unknown"
        if broken {
            logger.warning("the cache store's disk is below min_free with no cache entry left to remove there; entries stay in memory only",
                           metadata: ["store": .string(persistent.description), "free": .string(free), "min_free": .string(Units.format(bytes: minFree))])
        } else {
            logger.notice("the cache store's disk is above min_free again", metadata: ["store": .string(persistent.description), "free": .string(free)])
        }
    }

    /// How often the floor is looked at without a write (statvfs: cheap).
    static let floorCheckInterval: Duration = .seconds(2)

    /// `part` and the stored parts it can be combined with, as few entries as cover the same
    /// bytes (overlapping or adjacent parts become one), each with the newest part's fields
    /// and freshness; one complete response when they cover it all.
    static func combine(_ part: CacheEntry, with siblings: [CacheEntry]) -> [CacheEntry] {
        guard let complete = part.part?.complete else { return [part] }
        let pieces = ([part] + siblings).compactMap { entry in entry.part.map { (first: $0.first, body: entry.body) } }
            .sorted { $0.first < $1.first }
        var runs: [(first: Int, body: ByteBuffer)] = []
        for piece in pieces {
            guard var last = runs.popLast() else {
                runs.append(piece)
                continue
            }
            let end = last.first + last.body.readableBytes
            if piece.first <= end {
                // Overlapping or adjacent: append what the piece adds beyond the run.
                let skip = end - piece.first
                if skip < piece.body.readableBytes, let tail = piece.body.getSlice(at: piece.body.readerIndex + skip, length: piece.body.readableBytes - skip) {
                    var joined = ByteBufferAllocator().buffer(capacity: last.body.readableBytes + tail.readableBytes)
                    joined.writeImmutableBuffer(last.body)
                    joined.writeImmutableBuffer(tail)
                    last.body = joined
                }
                runs.append(last)
            } else {
                runs.append(last)
                runs.append(piece)
            }
        }
        return runs.map { run in
            let body = CachePolicy.compact(run.body)
            if run.first == 0, body.readableBytes == complete { return part.replacing(body: body, part: nil) }
            return part.replacing(body: body, part: CacheEntry.Part(first: run.first, complete: complete))
        }
    }

    /// Removes the exact key and every key starting with each prefix, in memory and in the
    /// persistent tier (waiting for the latter, so that no later read finds them); returns
    /// how many keys each tier held.
    @discardableResult
    func invalidate(prefixes: [String]) async -> (memory: Int, store: Int) {
        let removed = state.withLock { state in
            state.removals &+= 1
            let keys = state.memory.keys { key in prefixes.contains { key.hasPrefix($0) } }
            for key in keys { state.memory.remove(key) }
            return keys.count
        }
        metrics.evicted(removed, reason: "invalidated")
        metrics.update(entries: entryCount, bytes: byteCount)
        guard let persistent else { return (removed, 0) }
        let stored = await queue.run { [logger] in
            var stored = 0
            for prefix in prefixes {
                do {
                    stored += try await persistent.delete(Self.namespace, prefix: prefix)
                } catch {
                    logger.warning("cache store invalidation failed", metadata: ["store": .string(persistent.description), "error": .string(ErrorText.describe(error))])
                }
            }
            return stored
        }
        state.withLock { $0.removals &+= 1 }
        return (removed, stored)
    }

    /// What is stored under the keys that start with `prefix`, for `/-/cache`: the memory
    /// tier's, then the persistent tier's that memory does not hold (read, not brought in).
    func inspect(prefix: String) async -> [(key: String, entries: [CacheEntry], tier: String)] {
        var found: [(key: String, entries: [CacheEntry], tier: String)] = state.withLock { state in
            state.memory.keys { $0.hasPrefix(prefix) }.sorted().compactMap { key in
                state.memory.peek(key).map { (key, $0.entries, "memory") }
            }
        }
        guard let persistent else { return found }
        let now = clock.now()
        let stored = await queue.run { try? await persistent.list(Self.namespace, now: now) } ?? []
        for (key, value) in stored where key.hasPrefix(prefix) && !found.contains(where: { $0.key == key }) {
            if let entries = Self.decode(value.bytes) { found.append((key, entries, "store")) }
        }
        return found
    }

    private func enforceBounds() {
        let evicted = state.withLock { state in
            var evicted = 0
            while state.memory.count > maxEntries || state.memory.totalSize > maxBytes, state.memory.removeOldest() != nil {
                evicted += 1
            }
            return evicted
        }
        metrics.evicted(evicted, reason: "lru")
        metrics.update(entries: entryCount, bytes: byteCount)
    }

    var entryCount: Int { state.withLock { $0.memory.count } }
    var byteCount: Int { state.withLock { $0.memory.totalSize } }

    // MARK: Coalescing

    /// Joins the request in flight for `key`, or starts one (then the caller is the leader
    /// and must call ``finish(_:_:)``).
    func join(_ key: String) -> (flight: Flight, leader: Bool) {
        state.withLock { state in
            if let flight = state.flights[key] { return (flight, false) }
            let flight = Flight()
            state.flights[key] = flight
            return (flight, true)
        }
    }

    /// Ends the flight for `key` and wakes its followers.
    func finish(_ key: String, _ flight: Flight, _ outcome: Flight.Outcome) {
        state.withLock { state in
            if state.flights[key] === flight { state.flights[key] = nil }
        }
        flight.finish(outcome)
    }

    // MARK: Background upkeep

    /// Drops what is of no further use, in memory and in the persistent tier, and keeps the
    /// persistent tier within the same bounds.
    func purge() async {
        let now = clock.now()
        let started = ContinuousClock.now
        var longestTurn = Duration.zero
        // A chunk at a time, letting requests run in between: with a hundred thousand
        // entries one pass under the lock stalled the event loop for over 100 ms. (A yield
        // is not enough: the event loop runs the tasks enqueued meanwhile before it looks
        // at its sockets again; a short sleep goes through them.)
        var removed = 0
        var slot = 0
        while true {
            let turnStart = ContinuousClock.now
            let turn = purgeChunk(from: slot, expiredAt: now)
            longestTurn = max(longestTurn, ContinuousClock.now - turnStart)
            guard let turn else { break }
            removed += turn.removed
            slot = turn.next
            try? await Task.sleep(for: .milliseconds(1))
        }
        logger.debug("cache purge", metadata: [
            "removed": .stringConvertible(removed), "entries": .stringConvertible(entryCount),
            "duration": .string("\(ContinuousClock.now - started)"), "longest_turn": .string("\(longestTurn)"),
        ])
        metrics.evicted(removed, reason: "expired")
        metrics.update(entries: entryCount, bytes: byteCount)
        guard let persistent else { return }
        await queue.run { [logger, maxEntries, maxBytes] in
            do {
                try await persistent.purge(expiredBefore: now)
                try await persistent.trim(Self.namespace, maxEntries: maxEntries, maxBytes: maxBytes)
            } catch {
                logger.warning("cache store purge failed", metadata: ["store": .string(persistent.description), "error": .string(ErrorText.describe(error))])
            }
        }
    }

    /// Drops the expired variants of the entries in one chunk of slots; nil past the last.
    private func purgeChunk(from slot: Int, expiredAt now: Date) -> (next: Int, removed: Int)? {
        state.withLock { state in
            guard let (entries, next) = state.memory.chunk(from: slot, limit: Self.purgeChunk) else { return nil }
            var removed = 0
            for (key, variants) in entries where variants.contains(where: { $0.discardAfter <= now }) {
                let all = variants.entries
                let kept = all.filter { $0.discardAfter > now }
                if kept.isEmpty {
                    state.memory.remove(key)
                    removed += 1
                } else if kept.count != all.count, let stored = StoredVariants(kept) {
                    state.memory.set(key, stored)
                }
            }
            return (next, removed)
        }
    }

    /// Waits until every write to the persistent tier is done.
    func flush() async {
        await queue.drain()
    }

    /// The purge loop, every 30 seconds, and — for a shared store — the removals other
    /// instances announce, until the storage is released or Veneer stops.
    func run() async {
        await withTaskGroup(of: Void.self) { group in
            if persistent?.freeSpace() != nil, minFree > 0 {
                group.addTask {
                    // What the store holds free goes back to the disk, and its reserve is made.
                    if let persistent = self.persistent { await self.queue.run { await persistent.releaseSpace() } }
                    // At once (a restart on a full disk), then every few seconds.
                    while !Task.isCancelled {
                        await self.keepFloor()
                        do {
                            try await self.clock.sleep(for: Self.floorCheckInterval)
                        } catch {
                            break
                        }
                    }
                }
            }
            group.addTask {
                while !Task.isCancelled {
                    do {
                        try await self.clock.sleep(for: .seconds(30))
                    } catch {
                        break
                    }
                    await self.purge()
                }
            }
            if let changes = persistent?.changes(Self.namespace) {
                group.addTask {
                    for await change in changes { self.apply(change) }
                }
            }
        }
    }

    /// Another instance removed keys (a write there): drop them here too. After a loss of
    /// contact, drop the whole memory tier: removals may have been missed.
    func apply(_ change: StoreChange) {
        let removed: Int = state.withLock { state in
            state.removals &+= 1
            switch change {
            case .removed(let prefix):
                let keys = state.memory.keys { $0.hasPrefix(prefix) }
                for key in keys { state.memory.remove(key) }
                return keys.count
            case .resync:
                let count = state.memory.count
                state.memory = LRUIndex()
                return count
            }
        }
        metrics.evicted(removed, reason: "invalidated")
        metrics.update(entries: entryCount, bytes: byteCount)
    }

    func close() async {
        await flush()
    }

    // MARK: Encoding of variants for the persistent tier

    static func encode(_ variants: Variants) -> [UInt8] {
        var out: [UInt8] = [UInt8(variants.count)]
        for entry in variants {
            let bytes = entry.encoded()
            withUnsafeBytes(of: UInt32(bytes.count).bigEndian) { out += $0 }
            out += bytes
        }
        return out
    }

    static func decode(_ bytes: [UInt8]) -> Variants? {
        guard let count = bytes.first else { return nil }
        var index = 1
        var variants: Variants = []
        for _ in 0..<count {
            guard index + 4 <= bytes.count else { return nil }
            let length = bytes[index..<index + 4].reduce(0) { $0 << 8 | Int($1) }
            index += 4
            guard index + length <= bytes.count, let entry = CacheEntry.decoded(Array(bytes[index..<index + length])) else { return nil }
            variants.append(entry)
            index += length
        }
        return index == bytes.count ? variants : nil
    }
}

/// One request in flight that others wait for.
final class Flight: Sendable {
    enum Outcome: Sendable {
        /// The entry stored (or refreshed) from the response: followers whose selecting
        /// headers it matches answer from it.
        case shared(CacheEntry)
        /// The response was for the leader only (not storable); followers ask on their own.
        case notShared
        /// The upstream failed; followers get the same error.
        case failed(ProxyError)
    }

    private let state = Mutex<(outcome: Outcome?, waiters: [CheckedContinuation<Outcome, Never>])>((nil, []))

    func wait() async -> Outcome {
        await withCheckedContinuation { continuation in
            let ready: Outcome? = state.withLock { state in
                if let outcome = state.outcome { return outcome }
                state.waiters.append(continuation)
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    func finish(_ outcome: Outcome) {
        let waiters = state.withLock { state in
            state.outcome = outcome
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: outcome) }
    }
}

/// Hit, miss, stale and eviction counters, and size gauges, for `/-/metrics`.
struct CacheMetrics: Sendable {
    /// A lookup's result, as `veneer_cache_requests_total{result}` and the status page name it:
    /// an index into the counters (a hit looked a string up in a dictionary).
    enum Result: Int, CaseIterable {
        case hit, miss, stale, revalidated, bypass, collapsed

    }

    /// The counters of ``results``, index for index with ``Result``.
    let results: [Counter]
    let evictions: [String: Counter]
    let entries: Gauge
    let bytes: Gauge
    /// The same lookups, readable, for the status page.
    let tally = StatusTally(CacheMetrics.results)

    static let results = ["hit", "miss", "stale", "revalidated", "bypass", "collapsed"]

    /// The families, as `/-/metrics` describes them.
    static let descriptions = [
        MetricDescription("veneer_cache_requests_total", "Cache lookups, by cache and result."),
        MetricDescription("veneer_cache_evictions_total", "Cache entries evicted, by cache and reason."),
        MetricDescription("veneer_cache_entries", "Entries held by a cache."),
        MetricDescription("veneer_cache_bytes", "Bytes held by a cache."),
    ]

    init(label: String, factory: any MetricsFactory) {
        let results = Self.results.map { result in
            Counter(label: "veneer_cache_requests_total", dimensions: [("cache", label), ("result", result)], factory: factory)
        }
        var evictions: [String: Counter] = [:]
        for reason in ["lru", "invalidated", "expired", "min_free"] {
            evictions[reason] = Counter(label: "veneer_cache_evictions_total", dimensions: [("cache", label), ("reason", reason)], factory: factory)
        }
        self.results = results
        self.evictions = evictions
        entries = Gauge(label: "veneer_cache_entries", dimensions: [("cache", label)], factory: factory)
        bytes = Gauge(label: "veneer_cache_bytes", dimensions: [("cache", label)], factory: factory)
    }

    func count(_ result: Result) {
        results[result.rawValue].increment()
        tally.add(at: result.rawValue)
    }
    func evicted(_ count: Int, reason: String) { if count > 0 { evictions[reason]?.increment(by: count) } }
    func update(entries: Int, bytes: Int) {
        self.entries.record(entries)
        self.bytes.record(bytes)
    }
}
