import Foundation

/// A value kept by a ``KeyValueStore``.
public struct StoredValue: Sendable, Equatable {
    /// The bytes.
    public var bytes: [UInt8]
    /// When the value stops being useful; nil: never. Expired values are not returned.
    public var expiresAt: Date?

    /// Creates a value.
    public init(bytes: [UInt8], expiresAt: Date? = nil) {
        self.bytes = bytes
        self.expiresAt = expiresAt
    }
}

/// A named store of the configuration (`stores:`): namespaced keys and bytes with expiry,
/// shared by every decorator that names it. Memory, SQLite (survives restarts) and
/// PostgreSQL (shared by several instances) implement it.
public protocol KeyValueStore: Sendable, CustomStringConvertible {
    /// The value of `key`, unless missing or expired at `now`.
    func get(_ namespace: String, _ key: String, now: Date) async throws -> StoredValue?
    /// Stores `value`; `durable` asks for it to survive a power loss once this returns
    /// (refresh tokens), not only a crash.
    func put(_ namespace: String, _ key: String, _ value: StoredValue, durable: Bool) async throws
    /// Removes one key; true when it was there.
    @discardableResult func delete(_ namespace: String, _ key: String) async throws -> Bool
    /// Removes every key that starts with `prefix`; returns how many.
    @discardableResult func delete(_ namespace: String, prefix: String) async throws -> Int
    /// Every unexpired key and value of a namespace, in key order.
    func list(_ namespace: String, now: Date) async throws -> [(key: String, value: StoredValue)]
    /// Removes what expired before `date`; returns how many.
    @discardableResult func purge(expiredBefore date: Date) async throws -> Int
    /// Keeps at most `maxEntries` keys and `maxBytes` bytes in a namespace, removing the
    /// least recently stored or read first; returns how many were removed.
    @discardableResult func trim(_ namespace: String, maxEntries: Int, maxBytes: Int) async throws -> Int
    /// Releases connections and files.
    func close() async

    /// Changes that other processes sharing the store made to a namespace (removed keys, and
    /// "resync" after the store was unreachable); nil when nobody else shares the store.
    func changes(_ namespace: String) -> AsyncStream<StoreChange>?

    /// Runs `body` while holding the lock called `name`: across every process sharing the
    /// store for shared stores, within this process otherwise.
    func withLock<T: Sendable>(_ name: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T

    /// The space left on the file system that holds the store's files, in bytes; nil when
    /// it keeps nothing on a local disk (memory, a database server).
    func freeSpace() -> Int?
    /// Removes the least recently stored or read keys of `namespace` until their values add
    /// up to `bytes` (or none are left); returns how many it removed.
    @discardableResult func evict(_ namespace: String, bytes: Int) async throws -> Int
    /// Gives the file system back what removals freed inside the store (free pages, a
    /// write-ahead log), as far as it can.
    func releaseSpace() async
    /// Why the store keeps what it is given in memory only, until the process ends, although
    /// it was meant to keep it longer (a SQLite file that cannot be opened), or nil.
    var memoryOnlyReason: String? { get }
}

extension KeyValueStore {
    /// Nothing on a local disk.
    public func freeSpace() -> Int? { nil }
    /// Nothing to make room on: removes nothing.
    public func evict(_ namespace: String, bytes: Int) async throws -> Int { 0 }
    /// Nothing to give back.
    public func releaseSpace() async {}
    /// It keeps what it promises to.
    public var memoryOnlyReason: String? { nil }
}

/// A change another process made to a shared store.
public enum StoreChange: Sendable, Equatable {
    /// Every key starting with this prefix was removed (or replaced).
    case removed(prefix: String)
    /// Changes may have been missed (the store was unreachable): forget what was read before.
    case resync
}

/// Named locks within one process: what `withLock` means for stores nobody else shares.
public actor LocalLocks {
    private var held: Set<String> = []
    private var waiters: [String: [CheckedContinuation<Void, Never>]] = [:]

    /// No locks held.
    public init() {}

    /// Runs `body` holding `name`.
    public func withLock<T: Sendable>(_ name: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        while held.contains(name) {
            await withCheckedContinuation { waiters[name, default: []].append($0) }
        }
        held.insert(name)
        defer {
            held.remove(name)
            if var queue = waiters[name], !queue.isEmpty {
                queue.removeFirst().resume()
                waiters[name] = queue.isEmpty ? nil : queue
            }
        }
        return try await body()
    }
}

/// Where factories get the stores they name.
public protocol StoreProvider: Sendable {
    /// The store called `name` in `stores:` (`memory` is always there).
    func store(named name: String) async throws -> any KeyValueStore
}

/// A store failure, with the store and what failed; never fatal for the cache.
public struct StoreError: Error, Sendable, CustomStringConvertible {
    /// Which store.
    public let store: String
    /// What went wrong.
    public let reason: String

    /// Creates an error.
    public init(store: String, reason: String) {
        self.store = store
        self.reason = reason
    }

    /// `STORE: reason`.
    public var description: String { "\(store): \(reason)" }
}
