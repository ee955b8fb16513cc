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
