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

    /// `name[=value]` pairs, names lower-cased, quotes removed.
    static func split(_ value: String) -> [(String, String?)] {
        var out: [(String, String?)] = []
        var current = ""
        var quoted = false
        for character in value + "," {
            if character == "\"" { quoted.toggle() }
            if character == "," && !quoted {
                let piece = current.trimmingSpaces
                current = ""
                guard !piece.isEmpty else { continue }
                if let equals = piece.firstIndex(of: "=") {
                    var argument = String(piece[piece.index(after: equals)...].trimmingSpaces)
                    if argument.hasPrefix("\""), argument.hasSuffix("\""), argument.count >= 2 { argument = String(argument.dropFirst().dropLast()) }
                    out.append((piece[..<equals].trimmingSpaces.lowercased(), argument))
                } else {
                    out.append((piece.lowercased(), nil))
                }
                continue
            }
            current.append(character)
        }
        return out
    }

    /// Delta-seconds: non-negative, capped at 2^31 (RFC 9111 §1.2.2).
    static func seconds(_ text: String?) -> Int? {
        guard let text, !text.isEmpty, text.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int(text.prefix(10)).map { min($0, Int(Int32.max)) } ?? Int(Int32.max)
    }
}
