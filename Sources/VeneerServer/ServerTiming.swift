import VeneerCore

/// The `Server-Timing` field (W3C Server Timing, what browser devtools show in a request's
/// Timing tab) made of a request's ``RequestRecord/entries``:
/// `cache;desc="miss stored", auth_refresh;desc="token 41s left", upstream;dur=12.3`.
enum ServerTiming {
    /// The field value: one metric per entry, in their order; nil for none.
    static func value(_ entries: [RequestRecord.Entry]) -> String? {
        guard !entries.isEmpty else { return nil }
        var text = ""
        for entry in entries {
            if !text.isEmpty { text += ", " }
            text += metricName(entry.name)
            if !entry.detail.isEmpty { text += ";desc=" + quoted(entry.detail) }
            if let duration = entry.duration { text += ";dur=" + milliseconds(duration) }
        }
        return text
    }

    /// A metric name is a token (RFC 9110 §5.6.2): other characters become `_`.
    static func metricName(_ name: String) -> String {
        guard !name.isEmpty else { return "_" }
        if name.utf8.allSatisfy(isTokenByte) { return name }
        return String(decoding: name.utf8.map { isTokenByte($0) ? $0 : UInt8(ascii: "_") }, as: UTF8.self)
    }

    /// `text` as a quoted-string: `"` and `\` escaped, control characters dropped.
    static func quoted(_ text: String) -> String {
        var bytes: [UInt8] = [UInt8(ascii: "\"")]
        bytes.reserveCapacity(text.utf8.count + 2)
        for byte in text.utf8 {
            if byte < 0x20 || byte == 0x7F { continue }
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { bytes.append(UInt8(ascii: "\\")) }
            bytes.append(byte)
        }
        bytes.append(UInt8(ascii: "\""))
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Milliseconds with one decimal, rounded: `12.3`.
    static func milliseconds(_ duration: Duration) -> String {
        let parts = duration.components
        let micros = max(0, parts.seconds * 1_000_000 + parts.attoseconds / 1_000_000_000_000)
        let tenths = (micros + 50) / 100
        return "\(tenths / 10).\(tenths % 10)"
    }

    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): return true
        default: return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }
}
