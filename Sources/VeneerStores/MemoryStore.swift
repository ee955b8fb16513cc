import Foundation
import Synchronization
import VeneerCore

/// The `memory` store: a dictionary per namespace, gone at exit.
public final class MemoryStore: KeyValueStore {
    private struct Slot {
        var value: StoredValue
        var touched: UInt64
    }
    private struct State {
        var namespaces: [String: [String: Slot]] = [:]
        var clock: UInt64 = 0
    }
    private let state = Mutex(State())
    private let locks = LocalLocks()

    /// An empty store.
    public init() {}

    /// `memory`.
    public var description: String { "memory" }

    public func get(_ namespace: String, _ key: String, now: Date) async throws -> StoredValue? {
        state.withLock { state in
            guard var slot = state.namespaces[namespace]?[key] else { return nil }
            if let expiry = slot.value.expiresAt, expiry <= now { return nil }
            state.clock += 1
            slot.touched = state.clock
            state.namespaces[namespace]![key] = slot
            return slot.value
        }
    }

    public func put(_ namespace: String, _ key: String, _ value: StoredValue, durable: Bool) async throws {
        state.withLock { state in
            state.clock += 1
            state.namespaces[namespace, default: [:]][key] = Slot(value: value, touched: state.clock)
        }
    }

    public func delete(_ namespace: String, _ key: String) async throws -> Bool {
        state.withLock { $0.namespaces[namespace]?.removeValue(forKey: key) != nil }
    }

    public func delete(_ namespace: String, prefix: String) async throws -> Int {
        state.withLock { state in
            guard let keys = state.namespaces[namespace]?.keys.filter({ $0.hasPrefix(prefix) }) else { return 0 }
            for key in keys { state.namespaces[namespace]!.removeValue(forKey: key) }
            return keys.count
        }
    }

    public func list(_ namespace: String, now: Date) async throws -> [(key: String, value: StoredValue)] {
        state.withLock { state in
            (state.namespaces[namespace] ?? [:])
                .filter { $0.value.value.expiresAt.map { $0 > now } ?? true }
                .sorted { $0.key < $1.key }
                .map { ($0.key, $0.value.value) }
        }
    }

    public func purge(expiredBefore date: Date) async throws -> Int {
        state.withLock { state in
            var removed = 0
            for namespace in state.namespaces.keys {
                let expired = state.namespaces[namespace]!.filter { $0.value.value.expiresAt.map { $0 <= date } ?? false }.map(\.key)
                for key in expired { state.namespaces[namespace]!.removeValue(forKey: key) }
                removed += expired.count
            }
            return removed
        }
    }

    public func trim(_ namespace: String, maxEntries: Int, maxBytes: Int) async throws -> Int {
        state.withLock { state in
            guard let slots = state.namespaces[namespace] else { return 0 }
            var bytes = slots.values.reduce(0) { $0 + $1.value.bytes.count }
            var count = slots.count
            var removed = 0
            for (key, slot) in slots.sorted(by: { $0.value.touched < $1.value.touched }) where count > maxEntries || bytes > maxBytes {
                state.namespaces[namespace]!.removeValue(forKey: key)
                count -= 1
                bytes -= slot.value.bytes.count
                removed += 1
            }
            return removed
        }
    }

    public func close() async {}

    public func changes(_ namespace: String) -> AsyncStream<StoreChange>? { nil }

    public func withLock<T: Sendable>(_ name: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await locks.withLock(name, body)
    }
}
