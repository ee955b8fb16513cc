import HTTPTypes
import NIOCore
import VeneerCore

/// Which `Host` names and `Origin`s a listener answers for: what the edge checks before
/// anything else, so that no web page (DNS rebinding, a cross-site form or `fetch`) can
/// act with the credentials Veneer holds.
///
/// Pure and immutable: built from the environment once per chain generation, read by every
/// request. A listener answers for its own address as written, `localhost`, `127.0.0.1` and
/// `[::1]` (each with the port it listens on), and for `allowed_hosts`. Its own origin, for
/// a request, is the one that request came to: `http://` and its `Host`, host and port
/// exactly (a port-less `allowed_hosts` name widens the Hosts answered, never the origins:
/// a page on another port of that host is another origin, often another program). Other
/// origins must be listed in `allowed_origins`, and never open the admin API.
///
/// The server's, not the contract's: the configuration lists the names and origins
/// (checked there with the same syntax, ``AuthoritySyntax``), the edge gives the verdict
/// (``ProxyEdge/admit(method:target:fields:authority:localPort:requestID:)``).
///
/// A class of immutable parts, not a struct: every request reads its generation's, and a
/// struct was copied out for each (its six texts and lists retained and released, some 320
/// instructions a request; callgrind).
public final class EdgeAccess: Sendable, Hashable {
    /// A name of `allowed_hosts`: a host with a port, or any port when none is written.
    struct HostPattern: Sendable, Hashable {
        /// Lower-case; IPv6 in brackets.
        let host: String
        /// nil: any port.
        let port: Int?
    }

    /// What the edge does with a request, by its `Host`, `Origin` and `Sec-Fetch-Site`.
    enum Verdict: Sendable, Equatable {
        /// Served; `corsOrigin` is a listed origin whose answers get CORS headers.
        case pass(corsOrigin: String?)
        /// A CORS preflight (`OPTIONS` with `Access-Control-Request-Method`) of an allowed
        /// origin: answered by the edge.
        case preflight(origin: String)
        /// 421 `misdirected_request`: a Host Veneer does not answer for.
        case misdirected
        /// 403 `cross_site_refused`, and why.
        case crossSite(String)
    }

    /// The main listener's host as written (lower-case, IPv6 in brackets).
    let listenHost: String
    /// The separate admin listener's host, if there is one.
    let adminListenHost: String?
    /// `allowed_hosts`.
    let allowedHosts: [HostPattern]
    /// `allowed_origins`, as `scheme://host:port` in lower case.
    let allowedOrigins: Set<String>
    /// The main and the admin listener's own names (see ``ownNames(admin:)``), made once.
    private let mainNames: [String]
    private let adminNames: [String]

    /// The checks of an environment: the hosts its listeners listen on, `allowed_hosts`
    /// (`name`, `name:port`, `[v6]:port`) and `allowed_origins` (`scheme://host[:port]`), as
    /// the configuration checked them (an entry that is not one is left out).
    public init(listenHost: String, adminListenHost: String? = nil, allowedHosts: [String] = [], allowedOrigins: [String] = []) {
        let main = Self.bracketed(listenHost), admin = adminListenHost.map(Self.bracketed)
        self.listenHost = main
        self.adminListenHost = admin
        self.allowedHosts = allowedHosts.compactMap { AuthoritySyntax.hostPattern($0).map { HostPattern(host: $0.host, port: $0.port) } }
        self.allowedOrigins = Set(allowedOrigins.compactMap(AuthoritySyntax.normalizedOrigin))
        mainNames = Self.names(of: main)
        adminNames = Self.names(of: admin ?? main)
    }

    /// The same checks: the same listeners, `allowed_hosts` and `allowed_origins`.
    public static func == (lhs: EdgeAccess, rhs: EdgeAccess) -> Bool {
        lhs.listenHost == rhs.listenHost && lhs.adminListenHost == rhs.adminListenHost && lhs.allowedHosts == rhs.allowedHosts
            && lhs.allowedOrigins == rhs.allowedOrigins
    }

    /// Hashes what ``==(_:_:)`` compares.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(listenHost)
        hasher.combine(adminListenHost)
        hasher.combine(allowedHosts)
        hasher.combine(allowedOrigins)
    }

    // MARK: Checking a request

    /// The verdict on a request to the admin API (`admin`) or the posts API, that came with
    /// `authority` (its Host; nil for an HTTP/1.0 request without one) to local port `port`.
    func verdict(method: HTTPRequest.Method, authority: String?, fields: HTTPFields, port: Int, admin: Bool) -> Verdict {
        if let authority, !accepts(authority: authority, port: port, admin: admin) { return .misdirected }
        let fetchSite = fields.ifPresent(.secFetchSite)
        // Programs send no Origin: no list made for them.
        let origins = fields.contains(.origin) ? fields[values: .origin] : []
        if origins.isEmpty {
            // Programs send neither header; a browser that names no Origin may still say where it came from.
            if let fetchSite, !method.isSafe, fetchSite == "cross-site" || fetchSite == "same-site" {
                return .crossSite("A \(fetchSite) \(method.rawValue) without an allowed Origin is refused.")
            }
            if admin, !method.isSafe, let fetchSite, fetchSite != "same-origin", fetchSite != "none" {
                return .crossSite("The admin API takes changes only from programs or its own pages.")
            }
            return .pass(corsOrigin: nil)
        }
        guard origins.count == 1, let origin = AuthoritySyntax.normalizedOrigin(origins[0]) else {
            return .crossSite("The Origin is not allowed.")
        }
        let own = isOwn(origin: origin, authority: authority, port: port, admin: admin)
        if admin {
            // allowed_origins never opens the admin API; its own pages change things only same-origin.
            guard own else { return .crossSite("The admin API does not answer other origins.") }
            if !method.isSafe, fetchSite != "same-origin" {
                return .crossSite("The admin API takes changes only from programs or its own pages (Sec-Fetch-Site: same-origin).")
            }
            return .pass(corsOrigin: nil)
        }
        let listed = allowedOrigins.contains(origin)
        guard own || listed else { return .crossSite("The Origin \(origin) is not allowed (allowed_origins).") }
        if method == .options, fields[.accessControlRequestMethod] != nil { return .preflight(origin: origins[0]) }
        return .pass(corsOrigin: origins[0])
    }

    /// Whether `authority` (`host[:port]`) names this listener: one of its own names with
    /// its port, or an `allowed_hosts` entry.
    func accepts(authority: String, port: Int, admin: Bool) -> Bool {
        let names = ownNames(admin: admin)
        // The usual Host, `127.0.0.1:8080` as written: compared without making a string.
        if names.contains(where: { Self.isExactly(authority, host: $0, port: port) }) { return true }
        guard let (host, given) = AuthoritySyntax.split(authority: authority) else { return false }
        let hostPort = given ?? 80
        if hostPort == port, names.contains(host) { return true }
        return allowedHosts.contains { $0.host == host && ($0.port == nil || $0.port == hostPort) }
    }

    /// Whether `origin` (normalized) is the origin the request came to: `http://` and its
    /// Host `authority` (already accepted), with the port it names (80 when none). Without a
    /// Host (HTTP/1.0, never a browser): one of the listener's own names with its port.
    func isOwn(origin: String, authority: String?, port: Int, admin: Bool) -> Bool {
        guard origin.hasPrefix("http://") else { return false }
        guard let authority else {
            guard let (host, given) = AuthoritySyntax.split(authority: String(origin.dropFirst("http://".count))) else { return false }
            return given == port && ownNames(admin: admin).contains(host)
        }
        return AuthoritySyntax.normalizedOrigin("http://" + authority) == origin
    }

    /// The listener's own names, wildcards left out (`0.0.0.0` is no name to be reached by).
    func ownNames(admin: Bool) -> [String] { admin ? adminNames : mainNames }

    static func names(of address: String) -> [String] {
        var names = ["127.0.0.1", "localhost", "[::1]"]
        if address != "0.0.0.0", address != "[::]", !names.contains(address) { names.append(address) }
        return names
    }

    /// Whether `authority` is `host:port` exactly as written (lower case, no leading zeros).
    @inline(__always)
    static func isExactly(_ authority: String, host: String, port: Int) -> Bool {
        // On the bytes by integer offsets: the views' generic `starts(with:)`, `dropFirst` and
        // index walks cost each request about 1,000 instructions (callgrind).
        let matched = authority.utf8.withContiguousStorageIfAvailable { text in
            host.utf8.withContiguousStorageIfAvailable { name in isExactly(text, host: name, port: port) }
        }
        if let matched, let matched { return matched }
        let text = Array(authority.utf8), name = Array(host.utf8)
        return text.withUnsafeBufferPointer { text in name.withUnsafeBufferPointer { name in isExactly(text, host: name, port: port) } }
    }

    private static func isExactly(_ text: UnsafeBufferPointer<UInt8>, host name: UnsafeBufferPointer<UInt8>, port: Int) -> Bool {
        guard text.count > name.count + 1, text.count - name.count - 1 <= 5, text[name.count] == UInt8(ascii: ":"),
              text[name.count + 1] != UInt8(ascii: "0") else { return false }
        for index in 0..<name.count where text[index] != name[index] { return false }
        var value = 0
        for index in (name.count + 1)..<text.count {
            let digit = text[index]
            guard digit >= UInt8(ascii: "0"), digit <= UInt8(ascii: "9") else { return false }
            value = value * 10 + Int(digit - UInt8(ascii: "0"))
        }
        return value == port
    }

    // MARK: Answers

    /// The answer to a preflight of `origin`: what the browser may send, for ten minutes.
    static func preflightAnswer(origin: String, fields: HTTPFields) -> ProxyResponse {
        var headers: HTTPFields = [
            .accessControlAllowOrigin: origin,
            .accessControlAllowMethods: "GET, HEAD, POST, PUT, PATCH, DELETE",
            .accessControlMaxAge: "600",
            .vary: "Origin, Access-Control-Request-Method, Access-Control-Request-Headers",
        ]
        // The headers asked for, if they are a list of field names (anything else is not echoed).
        if let asked = fields[.accessControlRequestHeaders],
           asked.split(separator: ",").allSatisfy({ HTTPField.Name(String($0.trimmingSpaces)) != nil }) {
            headers[.accessControlAllowHeaders] = asked
        }
        return ProxyResponse(status: .noContent, headers: ProxyHeaders(headers), body: .init())
    }

    /// `response` as a listed origin reads it: `Access-Control-Allow-Origin` and `Vary: Origin`
    /// added on the way out (never stored: the cache is inside the edge).
    static func withCORS(_ response: ProxyResponse, origin: String) -> ProxyResponse {
        var response = response
        response.headers[.accessControlAllowOrigin] = origin
        response.headers.append(HTTPField(name: .accessControlExposeHeaders, value: "X-Request-Id, Cache-Status, Age, ETag, Location"))
        if let vary = response.headers[.vary] {
            if !vary.lowercased().contains("origin") { response.headers[.vary] = vary + ", Origin" }
        } else {
            response.headers.append(HTTPField(name: .vary, value: "Origin"))
        }
        return response
    }

    static func bracketed(_ host: String) -> String {
        host.contains(":") && !host.hasPrefix("[") ? "[\(host.lowercased())]" : host.lowercased()
    }
}

extension HTTPRequest.Method {
    /// GET, HEAD, OPTIONS and TRACE: what a page may send without a preflight and what must change nothing.
    var isSafe: Bool { self == .get || self == .head || self == .options || self == .trace }
}

extension HTTPField.Name {
    /// `Sec-Fetch-Site` (Fetch Metadata): where a browser's request came from.
    static let secFetchSite = HTTPField.Name("Sec-Fetch-Site")!
}
