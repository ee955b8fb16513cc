import Foundation
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import PostgresNIO
import ServiceLifecycle
import Synchronization
import VeneerCore

/// The `postgres` store: the state several Veneer instances share. Cache entries live in an
/// UNLOGGED table (losing them in a database crash costs a refetch, and skipping the WAL
/// makes every miss cheaper); tokens and blocks live in a regular table. Every removal is
/// announced with NOTIFY, so every instance drops its memory copy within moments; an
/// advisory lock makes one instance at a time refresh a shared token.
///
/// When the database is down or slow, every operation fails fast (after at most
/// ``operationTimeout``) instead of hanging, health says why, and a monitor reconnects
/// with backoff; when it is back, subscribers get ``StoreChange/resync``.
///
/// A `Service`: its connections, the LISTEN loop and the probe run in ``run()`` (the
/// runtime runs it from the moment a chain opens the store until no chain names it, or
/// graceful shutdown), never in tasks of their own. Without ``run()`` every operation fails
/// after a short wait for the first connection.
public final class PostgresStore: KeyValueStore, Service {
    /// How long one operation may take, unless the store is opened with another bound.
    public static let defaultOperationTimeout: Duration = .seconds(2)
    /// How long one operation of this store may take.
    public let operationTimeout: Duration
    static let channel = "veneer_kv"
    static let schemaVersion = 1

    /// `postgres:URL` (password redacted).
    public let description: String
    let client: PostgresClient
    let logger: Logger
    private let state = Mutex(State())
    /// Opened when the first connection attempt has ended.
    private let firstAttempt = Latch()
    private let onHealth: @Sendable (String?) -> Void

    /// What watches the database: the LISTEN connection and a periodic probe. The store is
    /// available when neither has a problem.
    private enum Watcher: Hashable { case listener, probe }

    private struct State {
        var problems: [Watcher: String] = [.listener: "connecting"]
        /// Whether the first connection attempt has ended, one way or the other.
        var settled = false
        var subscribers: [UInt64: (namespace: String, continuation: AsyncStream<StoreChange>.Continuation)] = [:]
        var nextSubscriber: UInt64 = 0

        var problem: String? { problems[.listener] ?? problems[.probe] }
    }

    /// Why the store is unavailable, if it is.
    public var problem: String? { state.withLock { $0.problem } }

    /// The store of `url`, not connected yet: ``run()`` connects (an unreachable database
    /// is not fatal) and keeps the schema up to date. `onHealth` hears nil when healthy,
    /// else a reason. `operationTimeout` bounds each operation (the tests of a loaded machine
    /// give more). Throws for a URL that is not usable.
    public static func open(url: String, password: Secret?, logger: Logger, operationTimeout: Duration = defaultOperationTimeout,
                            onHealth: @escaping @Sendable (String?) -> Void = { _ in }) throws -> PostgresStore {
        let configuration = try PostgresConnectionURL.configuration(url, password: password?.reveal())
        let client = PostgresClient(configuration: configuration, eventLoopGroup: MultiThreadedEventLoopGroup.singleton, backgroundLogger: logger)
        return PostgresStore(description: "postgres:" + PostgresURL.redacting(url), client: client, logger: logger,
                             operationTimeout: operationTimeout, onHealth: onHealth)
    }

    private init(description: String, client: PostgresClient, logger: Logger, operationTimeout: Duration,
                 onHealth: @escaping @Sendable (String?) -> Void) {
        self.description = description
        self.operationTimeout = operationTimeout
        self.client = client
        self.logger = logger
        self.onHealth = onHealth
    }

    /// Runs the connection pool, the LISTEN loop and the probe until graceful shutdown or
    /// cancellation. Once only (the pool cannot run twice).
    public func run() async throws {
        await cancelWhenGracefulShutdown {
            await withDiscardingTaskGroup { group in
                group.addTask { await self.client.run() }
                group.addTask { await self.listen() }
                group.addTask { await self.probe() }
            }
        }
    }

    // MARK: Availability

    /// LISTEN on one connection, for removals other instances announce. A lost connection
    /// ends the notification sequence with an error: reconnect with backoff.
    private func listen() async {
        var delay: Duration = .milliseconds(200)
        var migrated = false
        while !Task.isCancelled {
            do {
                try await client.withConnection { connection in
                    if !migrated {
                        try await Self.migrate(connection, logger: logger)
                        migrated = true
                    }
                    try await connection.listen(on: Self.channel) { notifications in
                        self.report(.listener, problem: nil)
                        delay = .milliseconds(200)
                        for try await notification in notifications { self.dispatch(notification.payload) }
                    }
                }
            } catch {
                if Task.isCancelled { return }
                report(.listener, problem: "database unreachable: \(Self.describe(error))")
            }
            do {
                try await Task.sleep(for: delay)
            } catch {
                return
            }
            delay = min(delay * 2, .seconds(5))
        }
    }

    /// A silent network (no reset, no answer) never ends the LISTEN: a probe with a deadline
    /// notices it, and makes every operation fail fast until the database answers again.
    private func probe() async {
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: Self.probeInterval)
            } catch {
                return
            }
            guard state.withLock({ $0.settled }) else { continue }
            do {
                let client = self.client, logger = self.logger
                _ = try await withDeadline("probe", operationTimeout) { try await client.query("SELECT 1", logger: logger) }
                report(.probe, problem: nil)
            } catch let error as StoreError {
                report(.probe, problem: "database not answering: \(error.reason)")
            } catch {
                report(.probe, problem: "database not answering: \(Self.describe(error))")
            }
        }
    }

    static let probeInterval: Duration = .seconds(2)

    /// Records what a watcher found; logs, tells health and resyncs subscribers on a change
    /// of availability.
    private func report(_ watcher: Watcher, problem: String?) {
        let (before, after, subscribers) = state.withLock { state in
            let before = state.problem
            state.problems[watcher] = problem
            state.settled = true
            return (before, state.problem, Array(state.subscribers.values))
        }
        firstAttempt.open()
        guard before != after else { return }
        if let after {
            if before == nil || before == "connecting" {
                logger.error("postgres store unavailable", metadata: ["store": .string(description), "reason": .string(after)])
            }
            onHealth(after)
        } else {
            logger.info("postgres store connected", metadata: ["store": .string(description)])
            onHealth(nil)
            // Removals announced while we were away may have been missed: subscribers start over.
            for subscriber in subscribers { subscriber.continuation.yield(.resync) }
        }
    }

    private func dispatch(_ payload: String) {
        let parts = payload.split(separator: "\t", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { return }
        let namespace = String(parts[0]), prefix = String(parts[1])
        let subscribers = state.withLock { $0.subscribers.values.filter { $0.namespace == namespace } }
        for subscriber in subscribers { subscriber.continuation.yield(.removed(prefix: prefix)) }
    }

    static func describe(_ error: any Error) -> String {
        if let error = error as? PSQLError {
            if let message = error.serverInfo?[.message] { return message }
            return "\(error.code)"
        }
        return ErrorText.describe(error)
    }

    /// Fails at once while the database is known to be down; right after start, waits a
    /// moment for the first connection (so that `veneer unblock` or the first token read
    /// does not fail just because the pool is still connecting).
    private func checkAvailable() async throws {
        if !state.withLock({ $0.settled }) {
            await withTaskGroup(of: Void.self) { race in
                race.addTask { await self.firstAttempt.wait() }
                race.addTask { try? await Task.sleep(for: Self.firstConnectionWait) }
                _ = await race.next()
                race.cancelAll()
            }
        }
        if let problem { throw StoreError(store: description, reason: problem) }
    }

    /// How long an operation waits for the first connection attempt to end.
    public static let firstConnectionWait: Duration = .seconds(3)

    /// Runs `operation`, returning at the deadline even when it does not: a query sent on a
    /// connection that went silent does not react to cancellation, so it is left to finish
    /// (or fail) on its own while the caller gets a timeout.
    private func withDeadline<T: Sendable>(_ what: String, _ timeout: Duration,
                                           _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
        let race = DeadlineRace<T>()
        let description = self.description
        return try await withCheckedThrowingContinuation { continuation in
            race.arm(continuation)
            // Unstructured on purpose: the caller must not wait for a query that does not end.
            // The timer goes as soon as the work is done (no sleeping task per operation).
            let work = Mutex<Task<Void, Never>?>(nil)
            let timer = Task {
                do {
                    try await Task.sleep(for: timeout)
                } catch {
                    return
                }
                if race.settle(.failure(StoreError(store: description, reason: "\(what) took longer than \(timeout)"))) {
                    work.withLock { $0 }?.cancel()
                }
            }
            work.withLock { slot in
                slot = Task {
                    defer { timer.cancel() }
                    do {
                        race.settle(.success(try await operation()))
                    } catch {
                        race.settle(.failure(error))
                    }
                }
            }
        }
    }

    /// Runs one operation with the timeout, failing at once while the database is down.
    private func perform<T: Sendable>(_ what: String, _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
        try await checkAvailable()
        do {
            return try await withDeadline(what, operationTimeout, operation)
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError(store: description, reason: "\(what) failed: \(Self.describe(error))")
        }
    }

    // MARK: Schema

    /// Creates or upgrades the schema; idempotent, and serialised by an advisory lock so
    /// that two instances starting at once do not trip over each other.
    static func migrate(_ connection: PostgresConnection, logger: Logger) async throws {
        try await connection.query("BEGIN", logger: logger)
        do {
            try await connection.query("SELECT pg_advisory_xact_lock(hashtext('veneer:schema'))", logger: logger)
            try await connection.query("""
                CREATE TABLE IF NOT EXISTS veneer_schema (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())
                """, logger: logger)
            var current = 0
            for try await version in try await connection.query("SELECT COALESCE(max(version), 0) FROM veneer_schema", logger: logger).decode(Int.self) {
                current = version
            }
            if current < 1 {
                try await connection.query("""
                    CREATE UNLOGGED TABLE IF NOT EXISTS veneer_cache (
                        namespace text NOT NULL, key text NOT NULL, value bytea NOT NULL, expires_at double precision,
                        touched_at double precision NOT NULL, size integer NOT NULL, PRIMARY KEY (namespace, key))
                    """, logger: logger)
                try await connection.query("""
                    CREATE TABLE IF NOT EXISTS veneer_kv (
                        namespace text NOT NULL, key text NOT NULL, value bytea NOT NULL, expires_at double precision,
                        touched_at double precision NOT NULL, size integer NOT NULL, PRIMARY KEY (namespace, key))
                    """, logger: logger)
                try await connection.query("CREATE INDEX IF NOT EXISTS veneer_cache_expiry ON veneer_cache (expires_at)", logger: logger)
                try await connection.query("CREATE INDEX IF NOT EXISTS veneer_kv_expiry ON veneer_kv (expires_at)", logger: logger)
                try await connection.query("INSERT INTO veneer_schema (version) VALUES (1) ON CONFLICT DO NOTHING", logger: logger)
                logger.info("postgres store schema created", metadata: ["version": "1"])
            }
            try await connection.query("COMMIT", logger: logger)
        } catch {
            _ = try? await connection.query("ROLLBACK", logger: logger)
            throw error
        }
    }

    /// Cache data goes to the UNLOGGED table; everything else must survive a database crash.
    static func table(_ namespace: String) -> String { namespace == "cache" ? "veneer_cache" : "veneer_kv" }

    // MARK: KeyValueStore

    public func get(_ namespace: String, _ key: String, now: Date) async throws -> StoredValue? {
        let client = self.client, logger = self.logger
        return try await perform("read") {
            let rows = try await client.query(PostgresQuery(unsafeSQL: """
                UPDATE \(Self.table(namespace)) SET touched_at = $3 WHERE namespace = $1 AND key = $2
                RETURNING value, expires_at
                """, binds: Self.binds(namespace, key, Date().timeIntervalSince1970)), logger: logger)
            for try await (value, expires) in rows.decode((ByteBuffer, Double?).self) {
                if let expires, expires <= now.timeIntervalSince1970 { return nil }
                return StoredValue(bytes: Array(value.readableBytesView), expiresAt: expires.map(Date.init(timeIntervalSince1970:)))
            }
            return nil
        }
    }

    public func put(_ namespace: String, _ key: String, _ value: StoredValue, durable: Bool) async throws {
        let client = self.client, logger = self.logger
        try await perform("write") {
            var binds = PostgresBindings()
            binds.append(namespace)
            binds.append(key)
            binds.append(ByteBuffer(bytes: value.bytes))
            binds.append(value.expiresAt?.timeIntervalSince1970)
            binds.append(Date().timeIntervalSince1970)
            binds.append(value.bytes.count)
            // Every commit of the regular table is durable (synchronous_commit is on by default).
            try await client.query(PostgresQuery(unsafeSQL: """
                INSERT INTO \(Self.table(namespace)) (namespace, key, value, expires_at, touched_at, size) VALUES ($1, $2, $3, $4, $5, $6)
                ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at,
                    touched_at = excluded.touched_at, size = excluded.size
                """, binds: binds), logger: logger)
        }
    }

    public func delete(_ namespace: String, _ key: String) async throws -> Bool {
        let client = self.client, logger = self.logger
        return try await perform("delete") {
            var deleted = false
            let rows = try await client.query(PostgresQuery(unsafeSQL: """
                WITH gone AS (DELETE FROM \(Self.table(namespace)) WHERE namespace = $1 AND key = $2 RETURNING key)
                SELECT (SELECT count(*) FROM gone)::integer, pg_notify('\(Self.channel)', left($1 || E'\\t' || $2, 1900))::text
                """, binds: Self.binds(namespace, key)), logger: logger)
            for try await (count, _) in rows.decode((Int, String?).self) { deleted = count > 0 }
            return deleted
        }
    }

    public func delete(_ namespace: String, prefix: String) async throws -> Int {
        let client = self.client, logger = self.logger
        return try await perform("delete") {
            var count = 0
            let rows = try await client.query(PostgresQuery(unsafeSQL: """
                WITH gone AS (DELETE FROM \(Self.table(namespace)) WHERE namespace = $1 AND left(key, length($2)) = $2 RETURNING key)
                SELECT (SELECT count(*) FROM gone)::integer, pg_notify('\(Self.channel)', left($1 || E'\\t' || $2, 1900))::text
                """, binds: Self.binds(namespace, prefix)), logger: logger)
            for try await (removed, _) in rows.decode((Int, String?).self) { count = removed }
            return count
        }
    }

    public func list(_ namespace: String, now: Date) async throws -> [(key: String, value: StoredValue)] {
        let client = self.client, logger = self.logger
        return try await perform("list") {
            let rows = try await client.query(PostgresQuery(unsafeSQL: """
                SELECT key, value, expires_at FROM \(Self.table(namespace))
                WHERE namespace = $1 AND (expires_at IS NULL OR expires_at > $2) ORDER BY key
                """, binds: Self.binds(namespace, now.timeIntervalSince1970)), logger: logger)
            var out: [(key: String, value: StoredValue)] = []
            for try await (key, value, expires) in rows.decode((String, ByteBuffer, Double?).self) {
                out.append((key, StoredValue(bytes: Array(value.readableBytesView), expiresAt: expires.map(Date.init(timeIntervalSince1970:)))))
            }
            return out
        }
    }

    public func purge(expiredBefore date: Date) async throws -> Int {
        let client = self.client, logger = self.logger
        return try await perform("purge") {
            var total = 0
            for table in ["veneer_cache", "veneer_kv"] {
                let rows = try await client.query(PostgresQuery(unsafeSQL: """
                    WITH gone AS (DELETE FROM \(table) WHERE expires_at IS NOT NULL AND expires_at <= $1 RETURNING 1)
                    SELECT count(*)::integer FROM gone
                    """, binds: Self.binds(date.timeIntervalSince1970)), logger: logger)
                for try await count in rows.decode(Int.self) { total += count }
            }
            return total
        }
    }

    public func trim(_ namespace: String, maxEntries: Int, maxBytes: Int) async throws -> Int {
        let client = self.client, logger = self.logger
        return try await perform("trim") {
            var count = 0
            let rows = try await client.query(PostgresQuery(unsafeSQL: """
                WITH ranked AS (
                    SELECT key, row_number() OVER (ORDER BY touched_at DESC) AS position,
                           sum(size) OVER (ORDER BY touched_at DESC ROWS UNBOUNDED PRECEDING) AS running
                    FROM \(Self.table(namespace)) WHERE namespace = $1),
                gone AS (DELETE FROM \(Self.table(namespace)) t USING ranked r
                         WHERE t.namespace = $1 AND t.key = r.key AND (r.position > $2 OR r.running > $3) RETURNING 1)
                SELECT count(*)::integer FROM gone
                """, binds: Self.binds(namespace, maxEntries, maxBytes)), logger: logger)
            for try await removed in rows.decode(Int.self) { count = removed }
            return count
        }
    }

    public func changes(_ namespace: String) -> AsyncStream<StoreChange>? {
        let (stream, continuation) = AsyncStream<StoreChange>.makeStream()
        let id = state.withLock { state in
            state.nextSubscriber += 1
            state.subscribers[state.nextSubscriber] = (namespace, continuation)
            return state.nextSubscriber
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    /// A PostgreSQL advisory lock (session level) held on one connection while `body` runs
    /// (on others). Taking it gives up after 15 s, or at once when the database stops
    /// answering; `body` runs only once the lock is held, and its result is returned without
    /// waiting for the unlock.
    public func withLock<T: Sendable>(_ name: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await checkAvailable()
        let client = self.client, logger = self.logger, description = self.description, operationTimeout = self.operationTimeout
        let attempt = LockAttempt<T>()
        return try await withCheckedThrowingContinuation { continuation in
            attempt.race.arm(continuation)
            let work = Task {
                defer { attempt.finished() }
                do {
                    try await client.withConnection { connection in
                        let deadline = ContinuousClock.now + .seconds(15)
                        while true {
                            var acquired = false
                            for try await got in try await connection.query("SELECT pg_try_advisory_lock(hashtext(\(name)))", logger: logger).decode(Bool.self) {
                                acquired = got
                            }
                            if acquired { break }
                            guard ContinuousClock.now < deadline, !attempt.abandoned else {
                                throw StoreError(store: description, reason: "the lock \(name) is held elsewhere for too long")
                            }
                            attempt.progress()
                            try await Task.sleep(for: .milliseconds(25))
                        }
                        if attempt.acquired() {
                            do {
                                attempt.race.settle(.success(try await body()))
                            } catch {
                                attempt.race.settle(.failure(error))
                            }
                        }
                        _ = try? await connection.query("SELECT pg_advisory_unlock(hashtext(\(name)))", logger: logger)
                    }
                } catch let error as StoreError {
                    attempt.race.settle(.failure(error))
                } catch {
                    attempt.race.settle(.failure(StoreError(store: description, reason: "taking the lock \(name) failed: \(Self.describe(error))")))
                }
            }
            // Until the lock is held: every round of pg_try_advisory_lock must answer within the
            // operation timeout, and the store must stay available.
            Task { [weak self] in
                while true {
                    try? await Task.sleep(for: .milliseconds(100))
                    guard let reason = attempt.stalled(after: operationTimeout) ?? self?.problem else {
                        if attempt.isPastAcquisition { return }
                        continue
                    }
                    if attempt.abandon() {
                        attempt.race.settle(.failure(StoreError(store: description, reason: reason)))
                        work.cancel()
                    }
                    return
                }
            }
        }
    }

    /// Ends the subscriptions. The connections close when ``run()`` ends.
    public func close() async {
        let subscribers = state.withLock { state in
            defer { state.subscribers = [:] }
            return Array(state.subscribers.values)
        }
        for subscriber in subscribers { subscriber.continuation.finish() }
    }

    static func binds(_ values: any PostgresNonThrowingEncodable & Sendable...) -> PostgresBindings {
        var binds = PostgresBindings()
        for value in values { binds.append(value) }
        return binds
    }
}

/// `postgres://user:password@host:port/database?sslmode=...` to a client configuration.
public enum PostgresConnectionURL {
    /// The client configuration of `url`; `password` (from `password_file`) wins over the URL's.
    public static func configuration(_ url: String, password: String?) throws -> PostgresClient.Configuration {
        let parts: PostgresURL.Parts
        switch PostgresURL.parts(url) {
        case .success(let read): parts = read
        case .failure(let error): throw StoreError(store: "postgres", reason: error.message)
        }
        var tls: PostgresClient.Configuration.TLS
        var relaxed = TLSConfiguration.makeClientConfiguration()
        relaxed.certificateVerification = .none
        switch parts.sslMode {
        case "disable": tls = .disable
        case "require": tls = .require(relaxed)
        case "verify-ca", "verify-full": tls = .require(.makeClientConfiguration())
        default: tls = .prefer(relaxed)  // allow, prefer
        }
        var configuration = PostgresClient.Configuration(
            host: parts.host, port: parts.port, username: parts.user, password: password ?? parts.password, database: parts.database, tls: tls)
        configuration.options.connectTimeout = .seconds(2)
        configuration.options.maximumConnections = parts.poolSize
        // The server ends what the client would give up on anyway.
        configuration.options.additionalStartupParameters = [("statement_timeout", "5s"), ("lock_timeout", "5s")]
        configuration.options.keepAliveBehavior = .init(frequency: .seconds(10))
        return configuration
    }
}

/// The first of an operation's result and its deadline wins; the loser is ignored.
final class DeadlineRace<T: Sendable>: Sendable {
    private let continuation = Mutex<CheckedContinuation<T, any Error>?>(nil)

    func arm(_ continuation: CheckedContinuation<T, any Error>) {
        self.continuation.withLock { $0 = continuation }
    }

    /// Resumes the caller unless somebody already did; true when this call did.
    @discardableResult
    func settle(_ result: Result<T, any Error>) -> Bool {
        guard let waiting = continuation.withLock({ slot in defer { slot = nil }; return slot }) else { return false }
        waiting.resume(with: result)
        return true
    }
}

/// Where an attempt to take an advisory lock stands, between the task taking it and the
/// watchdog that gives up on it.
final class LockAttempt<T: Sendable>: Sendable {
    let race = DeadlineRace<T>()
    private struct Progress {
        var lastProgress = ContinuousClock.now
        var acquired = false
        var abandoned = false
    }
    private let state = Mutex(Progress())

    /// A round of pg_try_advisory_lock answered.
    func progress() { state.withLock { $0.lastProgress = .now } }

    /// The lock is held: true when the caller still waits (else unlock at once).
    func acquired() -> Bool {
        state.withLock { progress in
            guard !progress.abandoned else { return false }
            progress.acquired = true
            return true
        }
    }

    /// The attempt ended, whatever its outcome: the watchdog has nothing left to watch.
    func finished() { state.withLock { $0.acquired = true } }

    var isPastAcquisition: Bool { state.withLock { $0.acquired } }
    var abandoned: Bool { state.withLock { $0.abandoned } }

    /// Why the attempt looks stuck: no answer for `limit` while not yet holding the lock.
    func stalled(after limit: Duration) -> String? {
        state.withLock { progress in
            guard !progress.acquired, ContinuousClock.now - progress.lastProgress > limit else { return nil }
            return "the database did not answer within \(limit) while taking a lock"
        }
    }

    /// Gives up, unless the lock is already held; true when given up.
    func abandon() -> Bool {
        state.withLock { progress in
            guard !progress.acquired else { return false }
            progress.abandoned = true
            return true
        }
    }
}
