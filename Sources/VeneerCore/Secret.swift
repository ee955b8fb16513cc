import Foundation

/// A credential from the configuration: given inline, or read from a file (systemd's
/// `LoadCredential=`). It prints as `<redacted>`, never as its value.
public enum Secret: Sendable, Hashable, CustomStringConvertible {
    /// The secret itself.
    case value(String)
    /// A file that holds the secret (trailing newlines are dropped).
    case file(String)

    /// What appears instead of a secret.
    public static let redacted = "<redacted>"

    /// Reads the secret.
    public func reveal() throws(SecretError) -> String {
        switch self {
        case .value(let text): return text
        case .file(let path):
            guard let data = FileManager.default.contents(atPath: path) else {
                throw SecretError(path: path, reason: FileManager.default.fileExists(atPath: path) ? "is not readable" : "does not exist")
            }
            guard var text = String(data: data, encoding: .utf8) else { throw SecretError(path: path, reason: "is not UTF-8 text") }
            while text.hasSuffix("\n") || text.hasSuffix("\r") { text.removeLast() }
            guard !text.isEmpty else { throw SecretError(path: path, reason: "is empty") }
            return text
        }
    }

    /// `<redacted>` or `file:PATH`: safe to log.
    public var description: String {
        switch self {
        case .value: return Secret.redacted
        case .file(let path): return "file:\(path)"
        }
    }
}

/// A secret file that could not be read; names the file, never its content.
public struct SecretError: Error, Sendable, CustomStringConvertible {
    /// The file.
    public let path: String
    /// `does not exist`, `is not readable`, ...
    public let reason: String
    /// `secret file PATH does not exist`.
    public var description: String { "secret file \(path) \(reason)" }
}

/// PostgreSQL URLs in output: `veneer chain`, `/-/chain`, logs and errors.
public enum PostgresURL {
    /// The URL with the password of its user information and any `password=` query
    /// parameter replaced by the redaction marker. The user information ends at the last `@`
    /// of the authority (a raw `@` in a password stays hidden too).
    public static func redacting(_ url: String) -> String {
        guard let scheme = url.range(of: "://") else { return url }
        let rest = url[scheme.upperBound...]
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        var out = String(url[..<scheme.upperBound])
        let authority = rest[..<authorityEnd]
        if let at = authority.lastIndex(of: "@") {
            let userInfo = authority[..<at]
            if let colon = userInfo.firstIndex(of: ":") {
                out += userInfo[..<colon] + ":" + Secret.redacted
            } else {
                out += userInfo
            }
            out += authority[at...]
        } else {
            out += authority
        }
        var tail = String(rest[authorityEnd...])
        if let query = tail.firstIndex(of: "?") {
            let fragment = tail[query...].firstIndex(of: "#") ?? tail.endIndex
            let parameters = tail[tail.index(after: query)..<fragment].split(separator: "&", omittingEmptySubsequences: false).map { parameter in
                parameter.lowercased().hasPrefix("password=") ? "password=" + Secret.redacted : String(parameter)
            }
            tail = String(tail[..<tail.index(after: query)]) + parameters.joined(separator: "&") + String(tail[fragment...])
        }
        return out + tail
    }
}

extension PostgresURL {
    /// What a postgres store's URL says: read once by `veneer check` and by the store itself,
    /// so that what one refuses the other does.
    public struct Parts: Sendable, Equatable {
        /// The server's host name or address.
        public var host: String
        /// Its port [5432].
        public var port: Int
        /// The user [postgres].
        public var user: String
        /// The password in the URL, if any (`password_file` wins over it).
        public var password: String?
        /// The database, if named.
        public var database: String?
        /// `disable`, `allow`, `prefer`, `require`, `verify-ca` or `verify-full` [prefer].
        public var sslMode: String
        /// The connections of the store's pool [10].
        public var poolSize: Int
    }

    /// The `sslmode` values understood, as libpq's.
    public static let sslModes = ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"]
    /// One connection LISTENs for good, a token refresh holds one for its lock while it saves
    /// on another: fewer than 3 would starve. More than 1000 is more than a server allows.
    public static let poolSizeBounds = Bounded<Counts>(3...1000)
    /// TCP ports.
    public static let portBounds = Bounded<Counts>(1...65535)

    /// The parts of `url`, or what is wrong with it (the URL redacted in the message).
    public static func parts(_ url: String) -> Result<Parts, PostgresURLError> {
        guard let components = URLComponents(string: url), ["postgres", "postgresql"].contains(components.scheme ?? ""),
              let host = components.host, !host.isEmpty else {
            return .failure(PostgresURLError(message: "\(redacting(url)) is not a postgres://user@host/database URL"))
        }
        let port = components.port ?? 5432
        guard portBounds.range.contains(port) else {
            return .failure(PostgresURLError(message: "port \(port) is not a port from 1 to 65535"))
        }
        let query = Dictionary((components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 })
        let sslMode = query["sslmode"] ?? "prefer"
        guard sslModes.contains(sslMode) else {
            return .failure(PostgresURLError(message: "unknown sslmode '\(sslMode)' (known: \(sslModes.joined(separator: ", ")))"))
        }
        var poolSize = 10
        if let text = query["pool_size"] {
            guard let size = poolSizeBounds.value(text) else {
                return .failure(PostgresURLError(message: "pool_size '\(text)' is not a number from 3 to 1000"))
            }
            poolSize = size
        }
        let database = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        return .success(Parts(host: host, port: port, user: components.user?.removingPercentEncoding ?? "postgres",
                              password: components.password?.removingPercentEncoding, database: database.isEmpty ? nil : database,
                              sslMode: sslMode, poolSize: poolSize))
    }
}

/// What is wrong with a postgres store's URL.
public struct PostgresURLError: Error, Sendable, CustomStringConvertible {
    /// The problem, the URL redacted.
    public let message: String
    /// The message.
    public var description: String { message }
}
