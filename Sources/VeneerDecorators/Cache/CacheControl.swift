import HTTPTypes
import VeneerCore

/// The `Cache-Control` directives a shared cache acts on (RFC 9111 §5.2, RFC 5861).
struct CacheControl: Equatable {
    var noStore = false
    var noCache = false
    var isPrivate = false
    var isPublic = false
    var mustRevalidate = false
    var proxyRevalidate = false
    var maxAge: Int?
    var sharedMaxAge: Int?
    var staleIfError: Int?
    var staleWhileRevalidate: Int?

    /// Parses every `Cache-Control` field of `fields`; unknown directives are ignored and
    /// a malformed number makes its directive count as absent, except `max-age` and
    /// `s-maxage`, where a bad value means "already stale" (RFC 9111 §4.2.1).
    init(_ fields: HTTPFields) {
        for value in fields[values: .cacheControl] {
            for directive in CacheControl.split(value) {
                let (name, argument) = directive
                switch name {
                case "no-store": noStore = true
                case "no-cache": noCache = true
                case "private": isPrivate = true
                case "public": isPublic = true
                case "must-revalidate": mustRevalidate = true
                case "proxy-revalidate": proxyRevalidate = true
                case "max-age": maxAge = CacheControl.seconds(argument) ?? 0
                case "s-maxage": sharedMaxAge = CacheControl.seconds(argument) ?? 0
                case "stale-if-error": staleIfError = CacheControl.seconds(argument)
                case "stale-while-revalidate": staleWhileRevalidate = CacheControl.seconds(argument)
                default: continue
                }
            }
        }
    }

    init() {}

    /// `name[=value]` pairs, names lower-cased, quotes removed. Over the UTF-8 bytes: this
    /// runs for every response a cache considers storing.
    static func split(_ value: String) -> [(String, String?)] {
        var out: [(String, String?)] = []
        let bytes = Array(value.utf8)
        var start = 0
        var quoted = false
        for index in 0...bytes.count {
            let byte = index < bytes.count ? bytes[index] : UInt8(ascii: ",")
            if byte == UInt8(ascii: "\"") { quoted.toggle() }
            guard byte == UInt8(ascii: ","), !quoted else { continue }
            if let pair = directive(bytes[start..<index]) { out.append(pair) }
            start = index + 1
        }
        return out
    }

    /// One `name[=value]` item: trimmed, name lower-cased, a quoted value unquoted.
    static func directive(_ piece: ArraySlice<UInt8>) -> (String, String?)? {
        let isSpace = { (byte: UInt8) in byte == 0x20 || byte == 0x09 }
        guard let first = piece.firstIndex(where: { !isSpace($0) }) else { return nil }
        let last = piece.lastIndex(where: { !isSpace($0) })!
        let item = piece[first...last]
        let lowered = { (bytes: ArraySlice<UInt8>) -> String in
            String(decoding: bytes.map { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") ? $0 | 0x20 : $0 }, as: UTF8.self)
        }
        guard let equals = item.firstIndex(of: UInt8(ascii: "=")) else { return (lowered(item), nil) }
        var name = item[..<equals]
        while let end = name.last, isSpace(end) { name = name.dropLast() }
        var argument = item[(equals + 1)...]
        while let begin = argument.first, isSpace(begin) { argument = argument.dropFirst() }
        if argument.count >= 2, argument.first == UInt8(ascii: "\""), argument.last == UInt8(ascii: "\"") {
            argument = argument.dropFirst().dropLast()
        }
        return (lowered(name), String(decoding: argument, as: UTF8.self))
    }

    /// Delta-seconds: non-negative, capped at 2^31 (RFC 9111 §1.2.2).
    static func seconds(_ text: String?) -> Int? {
        guard let text, !text.isEmpty, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        return Int(text.prefix(10)).map { min($0, Int(Int32.max)) } ?? Int(Int32.max)
    }
}
