/// The one rule for request data that leaves its exchange: what `record` writes to a HAR file
/// and what the admin and status surfaces show (`/-/cache`, `/-/status`, `/-/events`, the
/// status page, `/-/blocks`, the logs). Credential headers, cookies, sensitive query
/// parameters, JSON members and form fields, and credentials recognised by their form
/// anywhere in a text (`Bearer ...`, `Basic ...`, a JWT, `access_token=...` in a URL) are
/// cut. Where the surface must still tell entries apart, the cut value is a short keyed
/// fingerprint (``Marker/fingerprint``); in a file kept beyond the process it is a bare
/// `<redacted>` (``Marker/plain``).
public struct RequestRedaction: Sendable {
    /// What a cut value becomes.
    public enum Marker: Sendable {
        /// `<redacted>`: for files (a fingerprint would outlive the key that made it).
        case plain
        /// `<redacted:1a2b3c4d>`: 32 bits of a hash keyed per process (Swift's seeded
        /// `Hasher`), enough to tell two callers apart on a live surface and worthless for
        /// guessing a value offline.
        case fingerprint
    }

    /// What a cut value becomes.
    public let marker: Marker
    /// Header names (lowercased) cut besides the built-in ones (`record`'s `redact_headers`).
    public let extraHeaders: Set<String>

    /// A rule with `marker` and `extraHeaders`.
    public init(marker: Marker, extraHeaders: Set<String> = []) {
        self.marker = marker
        self.extraHeaders = extraHeaders
    }

    /// The rule of the admin and status surfaces: fingerprints.
    public static let shown = RequestRedaction(marker: .fingerprint)
    /// The rule of files: bare markers.
    public static let written = RequestRedaction(marker: .plain)

    /// Headers whose values are always credentials.
    public static let credentialHeaders: Set<String> = ["authorization", "proxy-authorization", "cookie", "set-cookie"]
    /// Name parts that mark a credential, in a header, a query parameter, a JSON member or a form field.
    static let sensitiveParts = [
        "token", "secret", "password", "passwd", "passphrase", "api-key", "api_key", "apikey", "credential", "session",
        "authorization", "cookie", "signature", "private_key", "private-key", "privatekey", "access_key", "access-key", "accesskey",
    ]
    /// Whole names that mark a credential (too short to look for inside other names).
    static let sensitiveNames: Set<String> = ["key", "sig", "auth", "jwt", "pwd", "otp", "sid"]

    /// Whether a header, parameter, member or field of this name holds a credential.
    public static func isSensitive(_ name: some StringProtocol) -> Bool {
        let lower = name.lowercased()
        if sensitiveNames.contains(lower) || lower.hasSuffix("_key") || lower.hasSuffix("-key") { return true }
        return sensitiveParts.contains { lower.contains($0) }
    }

    /// Whether the values of header `name` are cut whatever they hold.
    public func isCredentialHeader(_ name: String) -> Bool {
        let lower = name.lowercased()
        return Self.credentialHeaders.contains(lower) || extraHeaders.contains(lower) || Self.isSensitive(lower)
    }

    // MARK: Markers

    /// What `value` becomes when cut.
    public func cut(_ value: some StringProtocol) -> String {
        switch marker {
        case .plain: return Secret.redacted
        case .fingerprint: return "<redacted:\(Self.fingerprint(value))>"
        }
    }

    /// Eight hex digits of a hash of `value` keyed per process.
    public static func fingerprint(_ value: some StringProtocol) -> String {
        var hasher = Hasher()
        hasher.combine("veneer.redaction")
        for byte in value.utf8 { hasher.combine(byte) }
        let bits = UInt32(truncatingIfNeeded: UInt(bitPattern: hasher.finalize()))
        let hex = String(bits, radix: 16)
        return String(repeating: "0", count: 8 - hex.count) + hex
    }

    /// Whether `value` holds a marker this type wrote (plain or fingerprinted): a value
    /// with a part cut (`Bearer <redacted>`) is no value to send again.
    public static func holdsMarker(_ value: some StringProtocol) -> Bool {
        value.contains("<redacted")
    }

    // MARK: Request data

    /// A header's value as it may be shown: cut for credential headers, else with any
    /// credential it carries (a Bearer value, a token in a URL) cut.
    public func header(_ name: String, _ value: String) -> String {
        if isCredentialHeader(name) { return cut(value) }
        // A credential under a name nobody thought of still says what it is.
        let lower = value.prefix(10).lowercased()
        if let scheme = Self.authSchemes.first(where: { lower.hasPrefix($0 + " ") }) {
            return String(value.prefix(scheme.count)) + " " + cut(value.dropFirst(scheme.count + 1))
        }
        return text(value)
    }

    /// The HTTP authentication schemes a header value may begin with.
    static let authSchemes = ["bearer", "basic", "digest", "negotiate", "ntlm", "token", "dpop"]

    /// A query or form body: sensitive parameters' values cut (and credentials in the others).
    public func query(_ query: some StringProtocol) -> String {
        pairs(query).map { pair in pair.value.map { pair.name + "=" + $0 } ?? pair.name }.joined(separator: "&")
    }

    /// The `name=value` pairs of a query or form body, sensitive values cut (a nil value:
    /// the parameter has no `=`).
    public func pairs(_ text: some StringProtocol) -> [(name: String, value: String?)] {
        text.split(separator: "&", omittingEmptySubsequences: true).map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0])
            guard parts.count > 1 else { return (name, nil) }
            let value = String(parts[1])
            return (name, Self.isSensitive(Self.decodedName(name)) ? cut(value) : self.text(value))
        }
    }

    /// The path of a request target, with `?…` in place of its query: what the request
    /// lists show (a query may carry anything, and they need not tell queries apart).
    public static func path(ofTarget target: some StringProtocol) -> String {
        let path = pathWithoutQuery(target)
        return path.endIndex == target.endIndex ? String(path) : String(path) + "?…"
    }

    /// The path of a request target, its query left out (the access log's `url.path`).
    public static func pathWithoutQuery<Text: StringProtocol>(_ target: Text) -> Text.SubSequence {
        target.utf8.firstIndex(of: UInt8(ascii: "?")).map { target[..<$0] } ?? target[...]
    }

    /// A JSON value with every credential cut: every value under a sensitive member, at any
    /// depth and whatever its form (a string, a number, each item of a list, each member of
    /// an object), and credentials recognised in any other string.
    public func json(_ value: JSONValue) -> JSONValue {
        switch value {
        case .object(let members):
            return .object(members.map { name, member in (name, Self.isSensitive(name) ? cutAll(member) : json(member)) })
        case .array(let items):
            return .array(items.map(json))
        case .string(let text):
            return .string(self.text(text))
        default:
            return value
        }
    }

    /// Every string and number inside `value` cut, its shape kept (a client reading the
    /// recording still finds a list where a list was).
    func cutAll(_ value: JSONValue) -> JSONValue {
        switch value {
        case .object(let members): return .object(members.map { ($0.0, cutAll($0.1)) })
        case .array(let items): return .array(items.map(cutAll))
        case .string(let text): return .string(cut(text))
        case .number(let text): return .string(cut(text))
        case .null, .bool: return value
        }
    }

    /// Free text (a header value, a text body, a JSON string) with the credentials that
    /// say what they are cut: `Bearer`/`Basic` values, JWTs, and the values of sensitive
    /// `name=value` parameters (a token in a URL, a form). Everything else is kept as it is.
    public func text(_ text: String) -> String {
        // Most values hold none of the signs: answer without building anything.
        guard Self.mayHoldCredential(text) else { return text }
        let bytes = Array(text.utf8)
        var out: [UInt8] = []
        var index = 0
        var kept = 0
        while index < bytes.count {
            guard let found = credential(bytes, at: index) else {
                index += 1
                continue
            }
            if out.isEmpty { out.reserveCapacity(bytes.count) }
            out.append(contentsOf: bytes[kept..<found.lowerBound])
            out.append(contentsOf: cut(String(decoding: bytes[found], as: UTF8.self)).utf8)
            index = found.upperBound
            kept = index
        }
        guard kept > 0 else { return text }
        out.append(contentsOf: bytes[kept...])
        return String(decoding: out, as: UTF8.self)
    }

    /// A cheap test: does `text` hold a `=`, or `bearer`, `basic` or `eyJ` at all?
    static func mayHoldCredential(_ text: String) -> Bool {
        if text.utf8.contains(UInt8(ascii: "=")) || text.contains("eyJ") { return true }
        let lower = text.lowercased()
        return lower.contains("bearer ") || lower.contains("basic ")
    }

    /// The credential that starts at `index`, if one does: the range of its value (what is
    /// cut), after what is kept (`Bearer `, `access_token=`).
    func credential(_ bytes: [UInt8], at index: Int) -> Range<Int>? {
        let atBoundary = index == 0 || !Self.isWordByte(bytes[index - 1])
        guard atBoundary else { return nil }
        // `Bearer X`, `Basic X`.
        for scheme in ["bearer", "basic"] {
            guard Self.startsCaseInsensitive(bytes, at: index, with: scheme) else { continue }
            var start = index + scheme.utf8.count
            guard start < bytes.count, bytes[start] == UInt8(ascii: " ") else { continue }
            while start < bytes.count, bytes[start] == UInt8(ascii: " ") { start += 1 }
            var end = start
            while end < bytes.count, Self.isToken68Byte(bytes[end]) { end += 1 }
            let value = bytes[start..<end]
            if scheme == "basic" ? Self.isBasicCredential(value) : Self.isBearerCredential(value) { return start..<end }
        }
        // A JWT: `eyJ...` header, `.`, payload, `.`, signature.
        if bytes.count - index >= 3, bytes[index] == UInt8(ascii: "e"), bytes[index + 1] == UInt8(ascii: "y"), bytes[index + 2] == UInt8(ascii: "J") {
            var end = index
            var dots = 0
            while end < bytes.count, Self.isBase64URLByte(bytes[end]) || bytes[end] == UInt8(ascii: ".") {
                if bytes[end] == UInt8(ascii: ".") { dots += 1 }
                end += 1
            }
            if dots >= 2, end - index >= 20 { return index..<end }
        }
        // `name=value` with a sensitive name.
        var nameEnd = index
        while nameEnd < bytes.count, nameEnd - index < 64, Self.isNameByte(bytes[nameEnd]) { nameEnd += 1 }
        if nameEnd > index, nameEnd < bytes.count, bytes[nameEnd] == UInt8(ascii: "="),
           Self.isSensitive(Self.decodedName(String(decoding: bytes[index..<nameEnd], as: UTF8.self))) {
            let start = nameEnd + 1
            var end = start
            while end < bytes.count, !Self.endsParameter(bytes[end]) { end += 1 }
            if end > start { return start..<end }
        }
        return nil
    }

    /// A parameter's name with `%XX` decoded where valid and `+` as a space: enough to read it.
    static func decodedName(_ name: String) -> String {
        guard name.utf8.contains(UInt8(ascii: "%")) || name.utf8.contains(UInt8(ascii: "+")) else { return name }
        var bytes: [UInt8] = []
        var rest = Array(name.utf8)[...]
        while let byte = rest.popFirst() {
            if byte == UInt8(ascii: "%"), rest.count >= 2, let value = UInt8(String(decoding: rest.prefix(2), as: UTF8.self), radix: 16) {
                bytes.append(value)
                rest = rest.dropFirst(2)
            } else {
                bytes.append(byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func startsCaseInsensitive(_ bytes: [UInt8], at index: Int, with word: String) -> Bool {
        let letters = word.utf8
        guard bytes.count - index >= letters.count else { return false }
        for (offset, letter) in letters.enumerated() where bytes[index + offset] | 0x20 != letter { return false }
        return true
    }

    /// A Basic credential: base64 of `user:password`.
    static func isBasicCredential(_ value: ArraySlice<UInt8>) -> Bool {
        guard value.count >= 4, value.count % 4 == 0, let decoded = base64Decoded(value) else { return false }
        return decoded.contains(UInt8(ascii: ":"))
    }

    /// A Bearer token: at least 8 token characters, and not a plain lower-case word (prose
    /// such as "bearer instrument").
    static func isBearerCredential(_ value: ArraySlice<UInt8>) -> Bool {
        value.count >= 8 && !value.allSatisfy { $0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z") }
    }

    static func base64Decoded(_ value: ArraySlice<UInt8>) -> [UInt8]? {
        var bits = 0, count = 0
        var out: [UInt8] = []
        for byte in value {
            let digit: Int
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): digit = Int(byte - UInt8(ascii: "A"))
            case UInt8(ascii: "a")...UInt8(ascii: "z"): digit = Int(byte - UInt8(ascii: "a")) + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = Int(byte - UInt8(ascii: "0")) + 52
            case UInt8(ascii: "+"): digit = 62
            case UInt8(ascii: "/"): digit = 63
            case UInt8(ascii: "="): continue
            default: return nil
            }
            bits = (bits << 6) | digit
            count += 6
            if count >= 8 {
                count -= 8
                out.append(UInt8(truncatingIfNeeded: bits >> count))
                bits &= (1 << count) - 1
            }
        }
        return out
    }

    static func isWordByte(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
            || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
            || byte >= 0x80
    }

    static func isNameByte(_ byte: UInt8) -> Bool {
        isWordByte(byte) && byte < 0x80 || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "%") || byte == UInt8(ascii: "[")
            || byte == UInt8(ascii: "]")
    }

    static func isBase64URLByte(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
            || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
    }

    /// RFC 9110's token68: what a Bearer or Basic credential is made of.
    static func isToken68Byte(_ byte: UInt8) -> Bool {
        isBase64URLByte(byte) || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "~") || byte == UInt8(ascii: "+")
            || byte == UInt8(ascii: "/") || byte == UInt8(ascii: "=")
    }

    /// What ends a parameter's value in a URL, a form, a cookie list or prose around them.
    static func endsParameter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "&"), UInt8(ascii: ";"), UInt8(ascii: ","), UInt8(ascii: "#"), UInt8(ascii: "\""), UInt8(ascii: "'"),
             UInt8(ascii: "<"), UInt8(ascii: ">"), UInt8(ascii: ")"), UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\r"),
             UInt8(ascii: "\n"), UInt8(ascii: "\\"):
            return true
        default:
            return false
        }
    }
}
