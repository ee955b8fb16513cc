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
