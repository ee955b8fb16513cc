import HTTPTypes
import Testing
import VeneerCore
@testable import VeneerServer

@Suite("EdgeAccess: which Host and Origin a listener answers for")
struct EdgeAccessTests {
    let access = EdgeAccess(listenHost: "127.0.0.1", adminListenHost: "::1",
                            allowedHosts: ["veneer.test", "other.test:8443"],
                            allowedOrigins: ["http://localhost:3000", "HTTPS://App.Example"])

    @Test("Host names: its own with its port, allowed_hosts with theirs or any; nothing else", arguments: [
        ("127.0.0.1:8080", false, true), ("localhost:8080", false, true), ("LocalHost:8080", false, true), ("[::1]:8080", false, true),
        ("127.0.0.1:8081", false, false), ("127.0.0.1", false, false), ("localhost.:8080", false, false), ("0.0.0.0:8080", false, false),
        ("rebind.attacker.example", false, false), ("127.0.0.1:8080:1", false, false), ("127.0.0.1:+80", false, false),
        ("127.0.0.1:08080", false, false), ("[::1:8080", false, false), ("[::1]x", false, false), ("", false, false), (":8080", false, false),
        ("veneer.test", false, true), ("veneer.test:1", false, true), ("other.test:8443", false, true), ("other.test:8080", false, false),
        ("other.test", false, false), ("[::1]:8080", true, true), ("127.0.0.1:8080", true, true),
    ])
    func hosts(_ authority: String, _ admin: Bool, _ accepted: Bool) {
        #expect(access.accepts(authority: authority, port: 8080, admin: admin) == accepted, "\(authority)")
    }

    @Test("the usual Host is matched as written: the name, a colon and the port's digits, no leading zero, nothing else", arguments: [
        ("127.0.0.1:8080", 8080, true), ("127.0.0.1:65535", 65535, true), ("127.0.0.1:1", 1, true), ("127.0.0.1:08080", 8080, false),
        ("127.0.0.1:", 8080, false), ("127.0.0.1", 8080, false), ("127.0.0.1:123456", 23456, false), ("127.0.0.2:8080", 8080, false),
        ("127.0.0.1x8080", 8080, false), ("127.0.0.1:80a0", 8080, false), ("127.0.0.1:8081", 8080, false), ("127.0.0.1:8080 ", 8080, false),
        ("LOCALHOST:8080", 8080, false), ("", 8080, false), ("127.0.0.1:0", 0, false),
    ])
    func exactHost(_ authority: String, _ port: Int, _ matched: Bool) {
        #expect(EdgeAccess.isExactly(authority, host: authority.hasPrefix("LOCALHOST") ? "localhost" : "127.0.0.1", port: port) == matched,
                "\(authority)")
    }

    @Test("a wildcard listen is no name of its own; a named listen address is")
    func ownNames() {
        let wildcard = EdgeAccess(listenHost: "0.0.0.0")
        #expect(!wildcard.accepts(authority: "0.0.0.0:80", port: 80, admin: false))
        #expect(wildcard.accepts(authority: "localhost", port: 80, admin: false))
        #expect(!EdgeAccess(listenHost: "::").accepts(authority: "[::]:80", port: 80, admin: false))
        #expect(EdgeAccess(listenHost: "Veneer.Lan").accepts(authority: "veneer.lan:80", port: 80, admin: false))
    }

    func verdict(_ fields: HTTPFields, _ method: HTTPRequest.Method = .post, admin: Bool = false, host: String? = "127.0.0.1:8080")
        -> EdgeAccess.Verdict {
        access.verdict(method: method, authority: host, fields: fields, port: 8080, admin: admin)
    }

    @Test("Origin and Sec-Fetch-Site on the posts API")
    func origins() {
        #expect(verdict([:]) == .pass(corsOrigin: nil))
        #expect(verdict([:], host: "evil.example") == .misdirected)
        #expect(verdict([:], host: nil) == .pass(corsOrigin: nil))
        #expect(verdict([.origin: "http://localhost:3000"]) == .pass(corsOrigin: "http://localhost:3000"))
        #expect(verdict([.origin: "https://app.example:443"]) == .pass(corsOrigin: "https://app.example:443"))
        #expect(verdict([.origin: "http://127.0.0.1:8080"]) == .pass(corsOrigin: "http://127.0.0.1:8080"))
        #expect(verdict([.origin: "http://localhost:8080"], host: "localhost:8080") == .pass(corsOrigin: "http://localhost:8080"))
        #expect(verdict([.origin: "http://veneer.test:9"], host: "veneer.test:9") == .pass(corsOrigin: "http://veneer.test:9"))
        // Own is the origin the request came to, exactly: another name or port of the
        // listener is another origin (another program may listen on [::1]:8080).
        for refused in ["https://evil.example", "null", "http://localhost:3001", "https://localhost:8080", "http://localhost:3000/x",
                        "http://app.example", "localhost:3000", "", "http://localhost:8080", "http://veneer.test:9", "https://127.0.0.1:8080"] {
            guard case .crossSite = verdict([.origin: refused], .get) else {
                Issue.record("\(refused) was not refused")
                continue
            }
        }
        if case .crossSite = verdict([.secFetchSite: "cross-site"]) {} else { Issue.record("cross-site POST passed") }
        if case .crossSite = verdict([.secFetchSite: "same-site"], .delete) {} else { Issue.record("same-site DELETE passed") }
        #expect(verdict([.secFetchSite: "cross-site"], .get) == .pass(corsOrigin: nil))
        #expect(verdict([.secFetchSite: "same-origin"]) == .pass(corsOrigin: nil))
        #expect(verdict([.secFetchSite: "cross-site", .origin: "http://localhost:3000"]) == .pass(corsOrigin: "http://localhost:3000"))
        var two = HTTPFields()
        two.append(HTTPField(name: .origin, value: "http://localhost:3000"))
        two.append(HTTPField(name: .origin, value: "https://evil.example"))
        if case .crossSite = verdict(two, .get) {} else { Issue.record("two Origins passed") }
        #expect(verdict([.origin: "http://localhost:3000", .accessControlRequestMethod: "PUT"], .options) == .preflight(origin: "http://localhost:3000"))
    }

    @Test("the admin API: allowed_origins never opens it; changes only without Origin or from its own page same-origin")
    func admin() {
        if case .crossSite = verdict([.origin: "http://localhost:3000"], .get, admin: true) {} else { Issue.record("a listed origin read admin") }
        if case .crossSite = verdict([.origin: "http://localhost:8080"], .delete, admin: true) {} else { Issue.record("own origin without same-origin") }
        if case .crossSite = verdict([.secFetchSite: "same-site"], .delete, admin: true) {} else { Issue.record("same-site without Origin") }
        #expect(verdict([:], .delete, admin: true) == .pass(corsOrigin: nil))
        #expect(verdict([.origin: "http://localhost:8080", .secFetchSite: "same-origin"], .delete, admin: true, host: "localhost:8080")
            == .pass(corsOrigin: nil))
        if case .crossSite = verdict([.origin: "http://localhost:8080", .secFetchSite: "same-origin"], .delete, admin: true) {} else {
            Issue.record("another name of the listener changed the admin API")
        }
        #expect(verdict([.origin: "http://127.0.0.1:8080"], .get, admin: true) == .pass(corsOrigin: nil))
        guard case .crossSite = verdict([.origin: "http://localhost:3000", .accessControlRequestMethod: "DELETE"], .options, admin: true) else {
            Issue.record("a preflight of the admin API was answered")
            return
        }
    }

    @Test("a port-less allowed_hosts name widens the Hosts answered, not the origins: a page on another port of that host is refused")
    func portlessAllowedHost() {
        let devbox = EdgeAccess(listenHost: "0.0.0.0", allowedHosts: ["devbox.test"])
        func verdict(_ fields: HTTPFields, _ method: HTTPRequest.Method, host: String?, admin: Bool = false) -> EdgeAccess.Verdict {
            devbox.verdict(method: method, authority: host, fields: fields, port: 8080, admin: admin)
        }
        // The issue's page at devbox.test:3000, reading and preflighting a DELETE on Veneer at :8080.
        for (fields, method) in [([HTTPField.Name.origin: "http://devbox.test:3000"], HTTPRequest.Method.get),
                                 ([.origin: "http://devbox.test:3000", .accessControlRequestMethod: "DELETE"], .options),
                                 ([.origin: "http://devbox.test:3000"], .delete), ([.origin: "http://devbox.test"], .get)] {
            guard case .crossSite = verdict(HTTPFields(fields.map { HTTPField(name: $0.key, value: $0.value) }), method, host: "devbox.test:8080") else {
                Issue.record("\(method.rawValue) \(fields) was not refused")
                continue
            }
        }
        if case .crossSite = verdict([.origin: "http://devbox.test:3000"], .get, host: "devbox.test:8080", admin: true) {} else {
            Issue.record("the admin API answered another port's page")
        }
        if case .crossSite = verdict([.origin: "http://devbox.test:8080"], .get, host: nil) {} else {
            Issue.record("without a Host, an allowed_hosts name counted as own")
        }
        // The page Veneer itself serves there is its own origin; the Host stays widened.
        #expect(verdict([.origin: "http://devbox.test:8080"], .post, host: "devbox.test:8080") == .pass(corsOrigin: "http://devbox.test:8080"))
        #expect(verdict([.origin: "http://devbox.test:8080", .secFetchSite: "same-origin"], .delete, host: "devbox.test:8080", admin: true)
            == .pass(corsOrigin: nil))
        #expect(verdict([.origin: "http://devbox.test"], .get, host: "devbox.test") == .pass(corsOrigin: "http://devbox.test"))
        #expect(devbox.accepts(authority: "devbox.test:3000", port: 8080, admin: false))
    }

    @Test("answers for a listed origin: the preflight, and CORS added to what goes out")
    func answers() {
        let preflight = EdgeAccess.preflightAnswer(origin: "http://localhost:3000", fields: [.accessControlRequestHeaders: "content-type, x-a"])
        #expect(preflight.status == .noContent)
        #expect(preflight.headers[.accessControlAllowHeaders] == "content-type, x-a")
        #expect(EdgeAccess.preflightAnswer(origin: "o", fields: [.accessControlRequestHeaders: "a b"]).headers[.accessControlAllowHeaders] == nil)
        let varied = EdgeAccess.withCORS(ProxyResponse(status: .ok, headers: [.vary: "Accept"]), origin: "http://localhost:3000")
        #expect(varied.headers[.vary] == "Accept, Origin")
        #expect(varied.headers[.accessControlAllowOrigin] == "http://localhost:3000")
        #expect(EdgeAccess.withCORS(ProxyResponse(status: .ok), origin: "o").headers[.vary] == "Origin")
    }
}
