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
}

/// The token row: the newest refresh token, the fingerprint of the initial token it
/// descends from, and the current access token with its expiry and generation, so that
/// instances sharing a store use one token instead of each refreshing its own.
struct RefreshTokenRecord: Sendable, Equatable {
    var refreshToken: String
    var origin: String
    var accessToken: String?
    var expiresAt: Date?
    var generation: Int = 0

    var encoded: [UInt8] {
        var members: [(String, JSONValue)] = [("refresh_token", .string(refreshToken)), ("origin", .string(origin)), ("generation", .int(generation))]
        if let accessToken { members.append(("access_token", .string(accessToken))) }
        if let expiresAt { members.append(("expires_at", .number(String(expiresAt.timeIntervalSince1970)))) }
        return Array(JSONValue.object(members).text.utf8)
    }

    init(refreshToken: String, origin: String, accessToken: String? = nil, expiresAt: Date? = nil, generation: Int = 0) {
        self.refreshToken = refreshToken
        self.origin = origin
        self.accessToken = accessToken
        self.expiresAt = expiresAt
        self.generation = generation
    }

    init?(decoding bytes: [UInt8]) {
        guard let value = try? JSONValue.parse(bytes), let token = value["refresh_token"]?.stringValue,
              let origin = value["origin"]?.stringValue else { return nil }
        self.init(refreshToken: token, origin: origin, accessToken: value["access_token"]?.stringValue,
                  expiresAt: value["expires_at"]?.doubleValue.map(Date.init(timeIntervalSince1970:)),
                  generation: value["generation"]?.intValue ?? 0)
    }

    /// A SHA-256 fingerprint of an initial token: recognises it without storing it twice.
    static func fingerprint(_ token: String) -> String {
        SHA256.hash(data: Array(token.utf8)).map { String(format: "%02x", $0) }.joined()
    }
}

/// A file written atomically: a temporary file (0600) in the same directory, fsync, rename
/// over the old one, fsync of the directory. A crash leaves the old file or the new one.
struct FileRefreshTokenStore: RefreshTokenStore {
    let path: String
    let locks = LocalLocks()

    func withLock<T: Sendable>(_ name: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await locks.withLock(name, body)
    }

    func load() async throws -> RefreshTokenRecord? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return RefreshTokenRecord(decoding: Array(data))
    }

    func save(_ record: RefreshTokenRecord) async throws {
        let directory = (path as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let temporary = path + ".tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let bytes = record.encoded
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw StoreError(store: path, reason: "cannot create \(temporary): \(String(cString: strerror(errno)))") }
        var written = 0
        while written < bytes.count {
            let result = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + written, bytes.count - written) }
            if result < 0 {
                if errno == EINTR { continue }
                let reason = String(cString: strerror(errno))
                close(fd)
                unlink(temporary)
                throw StoreError(store: path, reason: "cannot write: \(reason)")
            }
            written += result
        }
        guard fsync(fd) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            unlink(temporary)
            throw StoreError(store: path, reason: "fsync failed: \(reason)")
        }
        close(fd)
        guard rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw StoreError(store: path, reason: "rename failed: \(reason)")
        }
        let directoryFD = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryFD >= 0 {
            fsync(directoryFD)
            close(directoryFD)
        }
    }
}

/// A record in a named store (`store: local`), written with `durable: true`.
struct KeyValueRefreshTokenStore: RefreshTokenStore {
    let store: any KeyValueStore
    let key: String

    func load() async throws -> RefreshTokenRecord? {
        try await store.get("auth_refresh", key, now: Date()).flatMap { RefreshTokenRecord(decoding: $0.bytes) }
    }

    func save(_ record: RefreshTokenRecord) async throws {
        try await store.put("auth_refresh", key, StoredValue(bytes: record.encoded), durable: true)
    }

    func withLock<T: Sendable>(_ name: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await store.withLock(name, body)
    }
}
