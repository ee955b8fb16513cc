import Crypto
import Foundation
import VeneerCore

#if canImport(Glibc)
@preconcurrency import Glibc
#endif

/// Where the newest refresh token is kept, so that a restart (or a `kill -9` at any moment)
/// starts from it. Each record also remembers which initial token it descends from: when an
/// operator supplies a new one (the file changes), that one wins over the saved rotations.
protocol RefreshTokenStore: Sendable {
    /// The saved record, if any.
    func load() async throws -> RefreshTokenRecord?
    /// Saves a record durably before returning.
    func save(_ record: RefreshTokenRecord) async throws
    /// Runs `body` as the only refresher: across instances for a shared store.
    func withLock<T: Sendable>(_ name: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T
    /// Whether a save would succeed now, found by writing (and removing) something of a
    /// record's size where the record goes.
    func probe() async -> TokenStoreProbe
    /// Removes what a crash during a save left behind, reading nothing from it; returns how
    /// many it removed.
    func removeLeftovers() -> Int
    /// What other processes did to the store; ``StoreChange/resync`` when it is reachable
    /// again after an outage (shared stores only).
    func changes() -> AsyncStream<StoreChange>?
    /// Where the record is, for an operator (a file, a named store's key); nil: unnamed.
    var location: String? { get }
}

extension RefreshTokenStore {
    var location: String? { nil }
}

/// What a probe of the token store found.
enum TokenStoreProbe: Sendable, Equatable {
    /// A save would work.
    case writable
    /// A save would fail. `permanent`: it will not work without an operator (a read-only
    /// file system, no permission, a file where a folder should be, a store that keeps
    /// nothing across restarts), as opposed to a full disk or a database that is down.
    case unwritable(reason: String, permanent: Bool)
}

/// The token row: the newest refresh token, the fingerprint of the initial token it
/// descends from, and the current access token with its expiry and generation, so that
/// instances sharing a store use one token instead of each refreshing its own.
///
/// `inFlightSince` is set (and saved) just before the refresh token is sent to the token
/// endpoint and cleared by the save of its answer (or of a failure that proves the token
/// unused): a record loaded with it set says that Veneer stopped while the endpoint may have
/// rotated this very token.
///
/// `owners` and `retired` complete the family (``TokenFamily``): the environments that
/// configured it, and the families it replaced.
struct RefreshTokenRecord: Sendable, Equatable {
    var refreshToken: String
    var origin: String
    var accessToken: String?
    var expiresAt: Date?
    var generation: Int = 0
    var inFlightSince: Date?
    var owners: [String]?
    var retired: [String] = []

    /// The family this record holds.
    var family: TokenFamily { TokenFamily(origin: origin, owners: owners, retired: retired) }

    var encoded: [UInt8] {
        var members: [(String, JSONValue)] = [("refresh_token", .string(refreshToken)), ("origin", .string(origin)), ("generation", .int(generation))]
        if let accessToken { members.append(("access_token", .string(accessToken))) }
        if let expiresAt { members.append(("expires_at", .number(String(expiresAt.timeIntervalSince1970)))) }
        if let inFlightSince { members.append(("in_flight_since", .number(String(inFlightSince.timeIntervalSince1970)))) }
        if let owners { members.append(("owners", .array(owners.map(JSONValue.string)))) }
        if !retired.isEmpty { members.append(("retired", .array(retired.map(JSONValue.string)))) }
        return Array(JSONValue.object(members).text.utf8)
    }

    init(refreshToken: String, origin: String, accessToken: String? = nil, expiresAt: Date? = nil, generation: Int = 0,
         inFlightSince: Date? = nil, owners: [String]? = nil, retired: [String] = []) {
        self.refreshToken = refreshToken
        self.origin = origin
        self.accessToken = accessToken
        self.expiresAt = expiresAt
        self.generation = generation
        self.inFlightSince = inFlightSince
        self.owners = owners
        self.retired = retired
    }

    init?(decoding bytes: [UInt8]) {
        guard let value = try? JSONValue.parse(bytes), let token = value["refresh_token"]?.stringValue,
              let origin = value["origin"]?.stringValue else { return nil }
        func strings(_ name: String) -> [String]? {
            guard case .array(let items)? = value[name] else { return nil }
            return Array(items.compactMap(\.stringValue).suffix(TokenFamily.memory))
        }
        self.init(refreshToken: token, origin: origin, accessToken: value["access_token"]?.stringValue,
                  expiresAt: value["expires_at"]?.doubleValue.flatMap(Date.init(epochSeconds:)),
                  generation: value["generation"]?.intValue ?? 0,
                  inFlightSince: value["in_flight_since"]?.doubleValue.flatMap(Date.init(epochSeconds:)),
                  owners: strings("owners"), retired: strings("retired") ?? [])
    }

    /// A SHA-256 fingerprint of an initial token: recognises it without storing it twice.
    static func fingerprint(_ token: String) -> String {
        SHA256.hash(data: Array(token.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    /// The first 12 hex digits of the fingerprint of the refresh token: enough for an operator
    /// to match log lines, useless to anyone else.
    var shortFingerprint: String { String(Self.fingerprint(refreshToken).prefix(12)) }
}

/// A file written atomically: a temporary file (0600) with one fixed name in the same
/// folder, fsync, rename over the old one, fsync of the folder. A crash leaves the old file
/// or the new one, and at most one temporary file, which the next start removes unread.
struct FileRefreshTokenStore: RefreshTokenStore {
    let path: String
    let locks = LocalLocks()

    /// The one temporary file: a crash cannot leave one per attempt.
    var temporaryPath: String { path + ".tmp" }
    var location: String? { path }
    var directory: String { (path as NSString).deletingLastPathComponent }

    func withLock<T: Sendable>(_ name: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await locks.withLock(name, body)
    }

    func load() async throws -> RefreshTokenRecord? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return RefreshTokenRecord(decoding: Array(data))
    }

    func save(_ record: RefreshTokenRecord) async throws {
        do {
            try writeDurably(record.encoded, renamingTo: path)
        } catch {
            throw StoreError(store: path, reason: error.reason)
        }
    }

    func probe() async -> TokenStoreProbe {
        do {
            // As much as a record with long tokens: a disk with room for the probe has room for the save.
            try writeDurably(Array(repeating: UInt8(ascii: " "), count: 4096), renamingTo: nil)
            return .writable
        } catch {
            return .unwritable(reason: error.reason, permanent: error.isPermanent)
        }
    }

    func removeLeftovers() -> Int {
        let name = (path as NSString).lastPathComponent
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: directory.isEmpty ? "." : directory) else { return 0 }
        // `NAME.tmp` now, `NAME.tmp-PID-RANDOM` from versions that named one per attempt.
        let stale = entries.filter { $0.hasPrefix(name + ".tmp") }
        var removed = 0
        for entry in stale where unlink((directory.isEmpty ? "." : directory) + "/" + entry) == 0 { removed += 1 }
        return removed
    }

    func changes() -> AsyncStream<StoreChange>? { nil }

    /// Writes `bytes` to the temporary file and makes it durable; then renames it to `target`
    /// and makes the folder durable, or (a probe) removes it.
    private func writeDurably(_ bytes: [UInt8], renamingTo target: String?) throws(FileStoreError) {
        try Self.makeDirectory(directory)
        let temporary = temporaryPath
        // A leftover of a crash (or of a probe) is replaced, never read.
        if unlink(temporary) != 0, errno != ENOENT { throw FileStoreError("cannot remove \(temporary)") }
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw FileStoreError("cannot create \(temporary)") }
        var written = 0
        while written < bytes.count {
            let result = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + written, bytes.count - written) }
            if result < 0 {
                if errno == EINTR { continue }
                let error = FileStoreError("cannot write \(temporary)")
                close(fd)
                unlink(temporary)
                throw error
            }
            written += result
        }
        guard fsync(fd) == 0 else {
            let error = FileStoreError("fsync of \(temporary) failed")
            close(fd)
            unlink(temporary)
            throw error
        }
        close(fd)
        guard let target else {
            unlink(temporary)
            return
        }
        guard rename(temporary, target) == 0 else {
            let error = FileStoreError("cannot rename \(temporary) to \(target)")
            unlink(temporary)
            throw error
        }
        // The rename is durable only once the folder is: until then a power loss may bring
        // back the old file, so a failure here is a failed save.
        let directoryFD = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directoryFD >= 0 else { throw FileStoreError("cannot open \(directory)") }
        defer { close(directoryFD) }
        guard fsync(directoryFD) == 0 else { throw FileStoreError("fsync of \(directory) failed") }
    }

    /// `mkdir -p` with mode 0700 for what it creates, reporting the errno of the first failure.
    static func makeDirectory(_ directory: String) throws(FileStoreError) {
        guard !directory.isEmpty else { return }
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) {
            if isDirectory.boolValue { return }
            errno = ENOTDIR
            throw FileStoreError("\(directory) is not a folder")
        }
        try makeDirectory((directory as NSString).deletingLastPathComponent)
        if mkdir(directory, 0o700) != 0, errno != EEXIST { throw FileStoreError("cannot create \(directory)") }
    }
}

/// A failed file operation with its errno.
struct FileStoreError: Error {
    let reason: String
    let code: Int32

    /// Captures `errno` now.
    init(_ what: String) {
        code = errno
        reason = "\(what): \(String(cString: strerror(code)))"
    }

    /// Errors that no retry cures: an operator must change something first.
    var isPermanent: Bool { [EROFS, EACCES, EPERM, ENOTDIR, EISDIR, ELOOP, ENAMETOOLONG].contains(code) }
}

/// A record in a named store (`store: local`), written with `durable: true`.
struct KeyValueRefreshTokenStore: RefreshTokenStore {
    let store: any KeyValueStore
    let key: String
    var location: String? { "\(store.description), key auth_refresh/\(key)" }

    func load() async throws -> RefreshTokenRecord? {
        try await store.get("auth_refresh", key, now: Date()).flatMap { RefreshTokenRecord(decoding: $0.bytes) }
    }

    func save(_ record: RefreshTokenRecord) async throws {
        try await store.put("auth_refresh", key, StoredValue(bytes: record.encoded), durable: true)
    }

    func withLock<T: Sendable>(_ name: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await store.withLock(name, body)
    }

    func probe() async -> TokenStoreProbe {
        if let problem = store.memoryOnlyReason {
            // Its writes go to memory: they would "succeed" and be lost at the next start.
            return .unwritable(reason: problem, permanent: true)
        }
        do {
            try await store.put("auth_refresh", key + ".probe", StoredValue(bytes: Array(repeating: UInt8(ascii: " "), count: 4096)), durable: true)
            try await store.delete("auth_refresh", key + ".probe")
            return .writable
        } catch {
            return .unwritable(reason: "\(error)", permanent: false)
        }
    }

    func removeLeftovers() -> Int { 0 }

    func changes() -> AsyncStream<StoreChange>? { store.changes("auth_refresh") }
}
