import Foundation
import Logging
import NIOCore
import NIOPosix
import SQLiteNIO
import Synchronization
import VeneerCore

#if canImport(Glibc)
@preconcurrency import Glibc
#endif

/// The `sqlite` store: one table in a WAL-mode SQLite file, so that what it holds survives
/// a restart and a `kill -9`. A corrupt or unreadable file is moved aside (reported, never
/// fatal); when even a new file cannot be made, the store keeps working in memory and says
/// so through ``problem``.
public final class SQLiteStore: KeyValueStore {
    /// The database file.
    public let path: String
    private let logger: Logger
    private let connection: Mutex<SQLiteConnection?>
    private let durableConnection = Mutex<SQLiteConnection?>(nil)
    private let problemText = Mutex<String?>(nil)
    private let recoveryText = Mutex<String?>(nil)
    private let locks = LocalLocks()
    /// Whether a file without incremental vacuum was rebuilt with it (tried once).
    private let vacuumTried = Mutex(false)

    /// Why the store keeps its data in memory instead of the file, when it has to.
    public var problem: String? { problemText.withLock { $0 } }
    /// ``problem``: what a decorator that needs its writes to outlive the process asks.
    public var memoryOnlyReason: String? { problem }
    /// What was done about a corrupt or unreadable file (moved aside, replaced), if anything.
    public var recovery: String? { recoveryText.withLock { $0 } }

    /// `sqlite:PATH`.
    public var description: String { "sqlite:\(path)" }

    private init(path: String, logger: Logger, connection: SQLiteConnection) {
        self.path = path
        self.logger = logger
        self.connection = Mutex(connection)
    }

    /// Opens (or creates) the file, recovering from corruption by starting a new one.
    public static func open(path: String, logger: Logger) async -> SQLiteStore {
        var recovery: String?
        let directory = (path as NSString).deletingLastPathComponent
        if !directory.isEmpty {
            try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        // Opening writes (the write-ahead log, its index): on a full disk the reserve makes room.
        if (freeSpace(at: path) ?? .max) < reserveSize { dropReserve(of: path) }
        do {
            let connection = try await openChecked(.file(path: path), logger: logger)
            return SQLiteStore(path: path, logger: logger, connection: connection)
        } catch {
            let aside = path + ".corrupt-" + String(Int(Date().timeIntervalSince1970))
            recovery = "\(path) could not be used (\(Self.describe(error))); moved aside to \(aside) and started anew"
            logger.error("sqlite store file is unusable; starting a new one", metadata: [
                "file": .string(path), "moved_to": .string(aside), "error": .string(Self.describe(error)),
            ])
            for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: path + suffix) {
                try? FileManager.default.moveItem(atPath: path + suffix, toPath: aside + suffix)
            }
        }
        do {
            let connection = try await openChecked(.file(path: path), logger: logger)
            let store = SQLiteStore(path: path, logger: logger, connection: connection)
            store.recoveryText.withLock { $0 = recovery }
            return store
        } catch {
            let problem = "\(path) cannot be opened (\(Self.describe(error))); keeping data in memory until restarted"
            logger.error("sqlite store falls back to memory", metadata: ["file": .string(path), "error": .string(Self.describe(error))])
            // An in-memory database always opens; if even that fails the process is out of memory.
            let connection = try! await openChecked(.memory, logger: logger)
            let store = SQLiteStore(path: path, logger: logger, connection: connection)
            store.problemText.withLock { $0 = problem }
            store.recoveryText.withLock { $0 = recovery }
            return store
        }
    }

    static func openChecked(_ storage: SQLiteConnection.Storage, logger: Logger, synchronous: String = "NORMAL") async throws -> SQLiteConnection {
        let connection = try await SQLiteConnection.open(storage: storage, threadPool: .singleton, logger: logger,
                                                         on: MultiThreadedEventLoopGroup.singleton.any())
        do {
            if case .file = storage {
                // Pages that removals free can then be given back to the file system
                // (releaseSpace); it takes effect only in a file that has no table yet.
                _ = try await connection.query("PRAGMA auto_vacuum=INCREMENTAL")
                _ = try await connection.query("PRAGMA journal_mode=WAL")
            }
            _ = try await connection.query("PRAGMA synchronous=\(synchronous)")
            if synchronous != "FULL" {
                // Deleted content is still overwritten where that costs no extra write, but freed
                // overflow pages are not zeroed: evicting a cache entry would otherwise write as
                // much as it frees, which a full disk does not have (and the incremental vacuum
                // that follows gives those pages back anyway). The durable connection, which
                // saves refresh tokens, keeps the bundled SQLite's full secure delete.
                _ = try await connection.query("PRAGMA secure_delete=FAST")
            }
            _ = try await connection.query("PRAGMA busy_timeout=5000")
            let check = try await connection.query("PRAGMA quick_check")
            guard check.first?.column("quick_check")?.string == "ok" else {
                throw StoreError(store: "sqlite", reason: "integrity check failed")
            }
            _ = try await connection.query("""
                CREATE TABLE IF NOT EXISTS veneer_kv (
                    namespace TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL,
                    expires_at REAL, touched_at REAL NOT NULL, size INTEGER NOT NULL,
                    PRIMARY KEY (namespace, key)) WITHOUT ROWID
                """)
            _ = try await connection.query("CREATE INDEX IF NOT EXISTS veneer_kv_expiry ON veneer_kv (expires_at) WHERE expires_at IS NOT NULL")
            _ = try await connection.query("CREATE INDEX IF NOT EXISTS veneer_kv_touched ON veneer_kv (namespace, touched_at)")
            return connection
        } catch {
            try? await connection.close()
            throw error
        }
    }

    static func describe(_ error: any Error) -> String {
        if let error = error as? SQLiteError { return error.message }
        return ErrorText.describe(error)
    }

    private var current: SQLiteConnection {
        get throws {
            guard let connection = connection.withLock({ $0 }) else { throw StoreError(store: description, reason: "closed") }
            return connection
        }
    }

    /// Runs a query; a corrupted database is reported and replaced by a new file.
    private func run(_ sql: String, _ binds: [SQLiteData] = []) async throws -> [SQLiteRow] {
        do {
            return try await current.query(sql, binds)
        } catch let error as SQLiteError where error.reason == .corrupt || error.reason == .notADatabase {
            await recover(from: error)
            throw StoreError(store: description, reason: "database was corrupt and has been replaced")
        }
    }

    private func recover(from error: SQLiteError) async {
        logger.error("sqlite store found corruption; replacing the file", metadata: ["file": .string(path), "error": .string(error.message)])
        let old = connection.withLock { current in defer { current = nil }; return current }
        try? await old?.close()
        let replacement = await SQLiteStore.open(path: path + "", logger: logger)
        // Take over the new connection.
        let fresh = replacement.connection.withLock { current in defer { current = nil }; return current }
        connection.withLock { $0 = fresh }
        recoveryText.withLock { $0 = "\(path) was corrupt; replaced by a new file" }
    }

    public func get(_ namespace: String, _ key: String, now: Date) async throws -> StoredValue? {
        let rows = try await run("SELECT value, expires_at FROM veneer_kv WHERE namespace = ?1 AND key = ?2",
                                 [.text(namespace), .text(key)])
        guard let row = rows.first, case .blob(var blob)? = row.column("value") else { return nil }
        let expiresAt = row.column("expires_at")?.double.map { Date(timeIntervalSince1970: $0) }
        if let expiresAt, expiresAt <= now { return nil }
        _ = try? await run("UPDATE veneer_kv SET touched_at = ?3 WHERE namespace = ?1 AND key = ?2",
                           [.text(namespace), .text(key), .float(Date().timeIntervalSince1970)])
        return StoredValue(bytes: blob.readBytes(length: blob.readableBytes) ?? [], expiresAt: expiresAt)
    }

    public func put(_ namespace: String, _ key: String, _ value: StoredValue, durable: Bool) async throws {
        let binds: [SQLiteData] = [
            .text(namespace), .text(key), .blob(ByteBuffer(bytes: value.bytes)),
            value.expiresAt.map { .float($0.timeIntervalSince1970) } ?? .null,
            .float(Date().timeIntervalSince1970), .integer(value.bytes.count),
        ]
        let sql = """
            INSERT INTO veneer_kv (namespace, key, value, expires_at, touched_at, size) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
            ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at,
                touched_at = excluded.touched_at, size = excluded.size
            """
        if durable {
            // A second connection with synchronous=FULL: the commit is on disk when this returns.
            let durableConnection = try await durableConnectionOpened()
            _ = try await durableConnection.query(sql, binds)
        } else {
            _ = try await run(sql, binds)
        }
    }

    private func durableConnectionOpened() async throws -> SQLiteConnection {
        if let existing = durableConnection.withLock({ $0 }) { return existing }
        // Without a usable file, durable writes go where everything else goes (memory).
        guard problem == nil else { return try current }
        let opened = try await SQLiteStore.openChecked(.file(path: path), logger: logger, synchronous: "FULL")
        return durableConnection.withLock { slot in
            if let existing = slot {
                Task { try? await opened.close() }
                return existing
            }
            slot = opened
            return opened
        }
    }

    public func delete(_ namespace: String, _ key: String) async throws -> Bool {
        let rows = try await run("DELETE FROM veneer_kv WHERE namespace = ?1 AND key = ?2 RETURNING key", [.text(namespace), .text(key)])
        return !rows.isEmpty
    }

    public func delete(_ namespace: String, prefix: String) async throws -> Int {
        // substr() instead of LIKE: keys may contain % and _.
        let rows = try await run("DELETE FROM veneer_kv WHERE namespace = ?1 AND substr(key, 1, length(?2)) = ?2 RETURNING key",
                                 [.text(namespace), .text(prefix)])
        return rows.count
    }

    public func list(_ namespace: String, now: Date) async throws -> [(key: String, value: StoredValue)] {
        let rows = try await run("""
            SELECT key, value, expires_at FROM veneer_kv WHERE namespace = ?1 AND (expires_at IS NULL OR expires_at > ?2) ORDER BY key
            """, [.text(namespace), .float(now.timeIntervalSince1970)])
        return rows.compactMap { row in
            guard let key = row.column("key")?.string, case .blob(var blob)? = row.column("value") else { return nil }
            return (key, StoredValue(bytes: blob.readBytes(length: blob.readableBytes) ?? [],
                                     expiresAt: row.column("expires_at")?.double.map { Date(timeIntervalSince1970: $0) }))
        }
    }

    public func purge(expiredBefore date: Date) async throws -> Int {
        try await run("DELETE FROM veneer_kv WHERE expires_at IS NOT NULL AND expires_at <= ?1 RETURNING key",
                      [.float(date.timeIntervalSince1970)]).count
    }

    public func trim(_ namespace: String, maxEntries: Int, maxBytes: Int) async throws -> Int {
        let rows = try await run("""
            DELETE FROM veneer_kv WHERE namespace = ?1 AND key IN (
                SELECT key FROM (
                    SELECT key, ROW_NUMBER() OVER (ORDER BY touched_at DESC) AS position,
                           SUM(size) OVER (ORDER BY touched_at DESC ROWS UNBOUNDED PRECEDING) AS running
                    FROM veneer_kv WHERE namespace = ?1)
                WHERE position > ?2 OR running > ?3)
            RETURNING key
            """, [.text(namespace), .integer(maxEntries), .integer(maxBytes)])
        return rows.count
    }

    /// The space left on the file system of the database file once its write-ahead log is
    /// checkpointed (nil while it keeps data in memory): the log's frames are copied into the
    /// file before the log is cut, so until then what it holds takes its room twice.
    public func freeSpace() -> Int? {
        guard problem == nil, let free = Self.freeSpace(at: path) else { return nil }
        var log = stat()
        let pending = stat(path + "-wal", &log) == 0 ? Int(log.st_size) : 0
        return max(0, free - pending)
    }

    /// The space an unprivileged writer may still use on the file system of `file`'s folder.
    static func freeSpace(at file: String) -> Int? {
        let directory = (file as NSString).deletingLastPathComponent
        var stats = statvfs()
        guard statvfs(directory.isEmpty ? "." : directory, &stats) == 0 else { return nil }
        // Root's reserved blocks are no room to count on.
        let (bytes, overflow) = Int(clamping: stats.f_bavail).multipliedReportingOverflow(by: Int(clamping: stats.f_frsize))
        return overflow ? Int.max : bytes
    }

    /// Removes the least recently stored or read keys of `namespace` until `bytes` of values are gone.
    public func evict(_ namespace: String, bytes: Int) async throws -> Int {
        // The oldest first, up to and including the one that reaches `bytes`.
        let sql = """
            DELETE FROM veneer_kv WHERE namespace = ?1 AND key IN (
                SELECT key FROM (
                    SELECT key, SUM(size) OVER (ORDER BY touched_at, key ROWS UNBOUNDED PRECEDING) - size AS before
                    FROM veneer_kv WHERE namespace = ?1)
                WHERE before < ?2)
            RETURNING key
            """
        let binds: [SQLiteData] = [.text(namespace), .integer(max(0, bytes))]
        do {
            return try await run(sql, binds).count
        } catch {
            // A delete writes too (to the write-ahead log): on a full disk the reserve makes room for it.
            guard giveUpReserve() else { throw error }
            return try await run(sql, binds).count
        }
    }

    /// Gives the file system back the file's free pages and the write-ahead log, and makes
    /// the reserve when there is none.
    public func releaseSpace() async {
        let mode = try? await run("PRAGMA auto_vacuum").first?.column("auto_vacuum")?.integer
        if mode == 2 {
            // A step at a time: each moves at most 64 pages (256 KB) through the log, which
            // the checkpoint then empties, shrinking the file by as much; on a full disk the
            // reserve's megabyte is room enough.
            _ = await maintain("PRAGMA wal_checkpoint(TRUNCATE)")
            for _ in 0..<16_384 {
                guard let free = try? await run("PRAGMA freelist_count").first?.column("freelist_count")?.integer, free > 0,
                      await maintain("PRAGMA incremental_vacuum(64)"), await maintain("PRAGMA wal_checkpoint(TRUNCATE)"),
                      let left = try? await run("PRAGMA freelist_count").first?.column("freelist_count")?.integer, left < free else { break }
            }
        } else if vacuumTried.withLock({ tried in defer { tried = true }; return !tried }) {
            // A file made before Veneer set incremental vacuum: rebuilt once with it (this
            // needs about its live size in free space, which eviction has just made).
            _ = await maintain("PRAGMA wal_checkpoint(TRUNCATE)")
            _ = try? await run("PRAGMA auto_vacuum=INCREMENTAL")
            if await maintain("VACUUM") {
                logger.notice("sqlite store rebuilt with incremental vacuum, so that space freed by eviction goes back to the disk",
                              metadata: ["file": .string(path)])
            } else {
                logger.warning("sqlite store could not be rebuilt to give space back to the disk; freed pages are reused inside it",
                               metadata: ["file": .string(path)])
            }
        }
        _ = await maintain("PRAGMA wal_checkpoint(TRUNCATE)")
        Self.makeReserve(of: path)
    }

    /// Runs a statement that frees space but writes first (a delete, a compaction, a
    /// checkpoint); when it fails, and a reserve is there to give up, once more. True when it ran.
    private func maintain(_ sql: String, _ binds: [SQLiteData] = []) async -> Bool {
        do {
            _ = try await run(sql, binds)
            return true
        } catch {
            guard giveUpReserve() else { return false }
            return (try? await run(sql, binds)) != nil
        }
    }

    // MARK: The reserve

    /// A file of ``reserveSize`` bytes beside the database, made by ``releaseSpace()`` (which a
    /// disk cache calls when it starts): given up when the disk is full, so that the store can
    /// still delete and compact (both write), and made again once there is room. Without it a
    /// disk filled to the last byte (by anyone) leaves the store unable to free anything.
    static func reservePath(of path: String) -> String { path + ".reserve" }
    static let reserveSize = 1 << 20

    /// Removes the reserve; true when there was one.
    @discardableResult
    static func dropReserve(of path: String) -> Bool {
        unlink(reservePath(of: path)) == 0
    }

    /// Gives the reserve up after a write failed, when the disk is what is short (a failure
    /// for another reason keeps it); true when it did.
    private func giveUpReserve() -> Bool {
        guard (Self.freeSpace(at: path) ?? 0) < Self.reserveSize, Self.dropReserve(of: path) else { return false }
        logger.notice("the sqlite store's disk is full: its reserve was given up to make room", metadata: ["file": .string(path)])
        return true
    }

    /// Makes the reserve when there is none and the disk has room for it (and a little more).
    static func makeReserve(of path: String) {
        guard access(reservePath(of: path), F_OK) != 0, (freeSpace(at: path) ?? 0) >= reserveSize + (256 << 10) else { return }
        let fd = Glibc.open(reservePath(of: path), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { return }
        defer { Glibc.close(fd) }
        // Blocks really taken (a sparse file would free nothing when removed).
        if posix_fallocate(fd, 0, off_t(reserveSize)) != 0 { unlink(reservePath(of: path)) }
    }

    public func close() async {
        let connections: [SQLiteConnection?] = [
            connection.withLock { c in defer { c = nil }; return c },
            durableConnection.withLock { c in defer { c = nil }; return c },
        ]
        for connection in connections { try? await connection?.close() }
    }

    public func changes(_ namespace: String) -> AsyncStream<StoreChange>? { nil }

    public func withLock<T: Sendable>(_ name: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await locks.withLock(name, body)
    }
}
