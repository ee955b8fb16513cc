/// The syntax of a `host[:port]` authority and of a web origin (`scheme://host[:port]`),
/// which the configuration (`allowed_hosts`, `allowed_origins`) and the server's edge (the
/// `Host` and `Origin` of each request, ``EdgeAccess`` in VeneerServer) must read alike.
///
/// Package-level, like the other helpers Veneer's own modules share below both of them: it
/// is no part of the contract a decorator sees.
package enum AuthoritySyntax {
    /// `host[:port]` → (lower-case host, IPv6 in brackets; port); nil when malformed.
    package static func split(authority: String) -> (host: String, port: Int?)? {
        let text = authority.lowercased()
        var host = Substring(text)
        var portText: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            host = text[...close]
            let rest = text[text.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":") else { return nil }
                portText = rest.dropFirst()
            }
        } else if let colon = text.firstIndex(of: ":") {
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard !host.isEmpty else { return nil }
        guard let portText else { return (String(host), nil) }
        // Digits only, without leading zeros: one spelling per port.
        guard !portText.isEmpty, portText.count <= 5, portText.allSatisfy(\.isASCIIDigit), portText == "0" || !portText.hasPrefix("0"),
              let port = Int(portText), port <= 65535 else {
            return nil
        }
        return (String(host), port)
    }

    /// A host name as `allowed_hosts` lists it (`name`, `name:port`, `[v6]`, `[v6]:port`):
    /// lower-case host (IPv6 in brackets) and port (nil: any port); nil when it is not one.
    package static func hostPattern(_ text: String) -> (host: String, port: Int?)? {
        guard let (host, port) = split(authority: text), isHostName(host) else { return nil }
        return (host, port)
    }

    /// A DNS name or an IPv4 address (letters, digits, `-`, `.`), or an IPv6 address in brackets.
    package static func isHostName(_ host: String) -> Bool {
        if host.hasPrefix("[") { return host.hasSuffix("]") && ClientAddress(host.dropFirst().dropLast()) != nil }
        return !host.isEmpty && host.utf8.allSatisfy { byte in
            (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
        }
    }

    /// `scheme://host:port` in lower case (the default port written out); nil when it is not
    /// an origin as `allowed_origins` lists it (http or https, no path, no wildcard).
    package static func normalizedOrigin(_ text: String) -> String? {
        let lower = text.lowercased()
        let scheme: String
        if lower.hasPrefix("http://") { scheme = "http" } else if lower.hasPrefix("https://") { scheme = "https" } else { return nil }
        let rest = String(lower.dropFirst(scheme.count + 3))
        guard let (host, port) = split(authority: rest), isHostName(host) else { return nil }
        // The port always written, so that `http://localhost` and `http://localhost:80` are one origin.
        return "\(scheme)://\(host):\(port ?? (scheme == "http" ? 80 : 443))"
    }
}
