import HTTPTypes
import RawStructuredFieldValues
import VeneerCore

/// The `Cache-Control` directives a shared cache acts on (RFC 9111 §5.2, RFC 5861), read
/// from `Cache-Control` or from a targeted field (RFC 9213).
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
    /// `must-understand` (RFC 9111 §5.2.2.3): store only if the status code is understood,
    /// and then regardless of `no-store`.
    var mustUnderstand = false

    /// Parses `Cache-Control` field values; unknown directives are ignored and a malformed
    /// number makes its directive count as absent, except `max-age` and `s-maxage`, where a
    /// bad value means "already stale" (RFC 9111 §4.2.1).
    init(_ values: [String]) {
        for value in values {
            for directive in CacheControl.split(value) {
                let (name, argument) = directive
                switch name {
                case "no-store": noStore = true
                case "no-cache": noCache = true
                case "private": isPrivate = true
                case "public": isPublic = true
                case "must-revalidate": mustRevalidate = true
                case "proxy-revalidate": proxyRevalidate = true
                case "must-understand": mustUnderstand = true
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

    /// The directives of every `Cache-Control` field of `fields`.
    init(_ fields: HTTPFields) {
        self.init(fields[values: .cacheControl])
    }

    /// The directives of a targeted field (RFC 9213 §2.1): a structured Dictionary whose
    /// members are directives, delta-seconds as Integers, the others as Booleans (or, for
    /// `no-cache` and `private`, Strings of field names); parameters, unknown directives and
    /// members of the wrong type are ignored. Nil when the field is empty or does not parse,
    /// which makes the cache behave as if it were absent.
    init?(targeted value: String) {
        var parser = StructuredFieldValueParser(Array(value.utf8))
        guard let members = try? parser.parseDictionaryFieldValue(), members.count > 0 else {
            return nil
        }
        for (name, member) in members {
            guard case .item(let item) = member else { continue }
            let bare = item.rfc9651BareItem
            let flag: Bool = if case .bool(true) = bare { true } else { false }
            let seconds: Int? = if case .integer(let number) = bare, number >= 0 { Int(min(number, Int64(Int32.max))) } else { nil }
            let fieldNames: Bool = if case .string = bare { true } else { false }
            switch name {
            case "no-store" where flag: noStore = true
            case "no-cache" where flag || fieldNames: noCache = true
            case "private" where flag || fieldNames: isPrivate = true
            case "public" where flag: isPublic = true
            case "must-revalidate" where flag: mustRevalidate = true
            case "proxy-revalidate" where flag: proxyRevalidate = true
            case "must-understand" where flag: mustUnderstand = true
            case "max-age": if let seconds { maxAge = seconds }
            case "s-maxage": if let seconds { sharedMaxAge = seconds }
            case "stale-if-error": if let seconds { staleIfError = seconds }
            case "stale-while-revalidate": if let seconds { staleWhileRevalidate = seconds }
            default: continue
            }
        }
    }

    /// The directives that govern a response: those of the first of `targeted` (in order of
    /// precedence) that the response carries validly, replacing `Cache-Control` entirely
    /// (RFC 9213 §2.2); else `Cache-Control`'s. `isTargeted` says which.
    static func governing(_ headers: ProxyHeaders, targeted: [HTTPField.Name]) -> (control: CacheControl, isTargeted: Bool) {
        for name in targeted {
            if let value = headers[name], let control = CacheControl(targeted: value) { return (control, true) }
        }
        return (CacheControl(headers[values: .cacheControl]), false)
    }

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

    /// The `Age` of a response (RFC 9111 §5.1): the first member of the first field line, when
    /// it is a non-negative integer; nil (absent) for anything else (`7200.0`, `60s`, `-1`).
    static func age(_ values: [String]) -> Int? {
        guard let first = values.first else { return nil }
        let member = first.split(separator: ",", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        return seconds(String(member.trimmingSpaces))
    }

    /// Delta-seconds: non-negative, capped at 2^31 (RFC 9111 §1.2.2).
    static func seconds(_ text: String?) -> Int? {
        guard let text, !text.isEmpty, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        return Int(text.prefix(10)).map { min($0, Int(Int32.max)) } ?? Int(Int32.max)
    }
}
