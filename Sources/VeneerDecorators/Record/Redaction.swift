import VeneerCore

/// What `record` never writes down: credentials in headers, query parameters and bodies.
struct Redaction: Sendable {
    /// Extra header names (lowercased) to redact.
    let headers: Set<String>

    static let alwaysHeaders: Set<String> = ["authorization", "proxy-authorization", "cookie", "set-cookie"]
    /// Name parts that mark a credential, in a header, a query parameter or a JSON member.
    static let sensitiveParts = ["token", "secret", "password", "passwd", "api-key", "api_key", "apikey", "credential", "session"]

    static func isSensitive(_ name: String) -> Bool {
        let lower = name.lowercased()
        return sensitiveParts.contains { lower.contains($0) }
    }

    func header(_ name: String, _ value: String) -> String {
        let lower = name.lowercased()
        if Self.alwaysHeaders.contains(lower) || headers.contains(lower) || Self.isSensitive(lower) { return Secret.redacted }
        // A credential under a name nobody thought of still says what it is.
        let scheme = value.prefix(7).lowercased()
        if scheme.hasPrefix("bearer ") || scheme.hasPrefix("basic ") { return Secret.redacted }
        return value
    }

    /// `name=value` pairs with sensitive values replaced (query strings, form bodies).
    func pairs(_ text: String) -> [(String, String)] {
        text.split(separator: "&", omittingEmptySubsequences: true).map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0])
            let value = parts.count > 1 ? String(parts[1]) : ""
            return (name, Self.isSensitive(name.removingPercentEncodingLeniently) ? Secret.redacted : value)
        }
    }

    /// A JSON value with every sensitive member's value replaced, at any depth.
    func json(_ value: JSONValue) -> JSONValue {
        switch value {
        case .object(let members):
            return .object(members.map { name, member in
                (name, Self.isSensitive(name) && !member.isContainer ? .string(Secret.redacted) : json(member))
            })
        case .array(let items):
            return .array(items.map(json))
        default:
            return value
        }
    }
}

extension JSONValue {
    var isContainer: Bool {
        switch self {
        case .object, .array: return true
        default: return false
        }
    }
}

extension String {
    /// `%XX` decoded where valid, the rest as it is: enough to read a parameter's name.
    var removingPercentEncodingLeniently: String {
        guard contains("%") || contains("+") else { return self }
        var bytes: [UInt8] = []
        var utf8 = Array(self.utf8)[...]
        while let byte = utf8.popFirst() {
            if byte == UInt8(ascii: "%"), utf8.count >= 2,
               let value = UInt8(String(decoding: utf8.prefix(2), as: UTF8.self), radix: 16) {
                bytes.append(value)
                utf8 = utf8.dropFirst(2)
            } else {
                bytes.append(byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
