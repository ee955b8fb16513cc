import HTTPTypes
import VeneerCore

/// Hop-by-hop header fields (RFC 9110 §7.6.1): meaningful for one connection only, so a
/// proxy removes them in both directions, together with every field that `Connection` names.
public enum HopByHop {
    /// The fields that are always hop-by-hop, lower-case.
    public static let alwaysRemoved: [String] = [
        "connection", "proxy-connection", "keep-alive", "te", "transfer-encoding", "upgrade",
        "trailer", "proxy-authenticate", "proxy-authorization",
    ]

    /// Whether a field of this lower-case name never passes a hop: one of ``alwaysRemoved``,
    /// or `Content-Length` (which the sender sets anew from the buffered body). Runs for every
    /// field of every message, so it compares lengths before strings. (Going through the
    /// bytes version below measured 8% more CPU per proxied request in one A/B run.)
    @inlinable
    public static func isRemoved(_ canonicalName: String) -> Bool {
        switch canonicalName.utf8.count {
        case 2: return canonicalName == "te"
        case 7: return canonicalName == "upgrade" || canonicalName == "trailer"
        case 10: return canonicalName == "connection" || canonicalName == "keep-alive"
        case 14: return canonicalName == "content-length"
        case 16: return canonicalName == "proxy-connection"
        case 17: return canonicalName == "transfer-encoding"
        case 18: return canonicalName == "proxy-authenticate"
        case 19: return canonicalName == "proxy-authorization"
        default: return false
        }
    }

    /// ``isRemoved(_:)`` for a name as it came on the wire, in any case (the same names; a test
    /// checks that the two agree).
    public static func isRemoved(_ name: UnsafeRawBufferPointer) -> Bool {
        switch name.count {
        case 2: return HTTP1Syntax.equalsIgnoringCase(name, "te")
        case 7: return HTTP1Syntax.equalsIgnoringCase(name, "upgrade") || HTTP1Syntax.equalsIgnoringCase(name, "trailer")
        case 10: return HTTP1Syntax.equalsIgnoringCase(name, "connection") || HTTP1Syntax.equalsIgnoringCase(name, "keep-alive")
        case 14: return HTTP1Syntax.equalsIgnoringCase(name, "content-length")
        case 16: return HTTP1Syntax.equalsIgnoringCase(name, "proxy-connection")
        case 17: return HTTP1Syntax.equalsIgnoringCase(name, "transfer-encoding")
        case 18: return HTTP1Syntax.equalsIgnoringCase(name, "proxy-authenticate")
        case 19: return HTTP1Syntax.equalsIgnoringCase(name, "proxy-authorization")
        default: return false
        }
    }

    /// Removes hop-by-hop fields, those named in `Connection`, and `Content-Length`
    /// (which the sender sets anew from the buffered body). Cheap when there are none.
    public static func strip(_ fields: inout HTTPFields) {
        var found = false
        var named: [String] = []
        for field in fields {
            let name = field.name.canonicalName
            if isRemoved(name) {
                found = true
                if field.name == .connection {
                    for token in field.value.split(separator: ",") {
                        let token = token.trimmingSpaces.lowercased()
                        if !token.isEmpty { named.append(token) }
                    }
                }
            }
        }
        guard found else { return }
        var kept = HTTPFields()
        kept.reserveCapacity(fields.count)
        for field in fields {
            let name = field.name.canonicalName
            if isRemoved(name) || named.contains(name) { continue }
            kept.append(field)
        }
        fields = kept
    }
}
