import Testing
@testable import VeneerServer

/// The server span's `server.address` and `server.port`, split from the request's authority.
@Suite("server span: host and port")
struct ServerSpanTests {
    @Test("host:port, [v6]:port and bare hosts, as the semantic conventions split them")
    func hostAndPort() {
        let cases: [(String, String, Int?)] = [
            ("api.example", "api.example", nil),
            ("api.example:8080", "api.example", 8080),
            ("127.0.0.1:0", "127.0.0.1", 0),
            ("[::1]:8443", "::1", 8443),
            ("[::1]", "::1", nil),
            ("[]", "", nil),
            // Not host:port: a bare IPv6 address, and ports that are not digits.
            ("::1", "::1", nil),
            ("api.example:", "api.example", nil),
            ("api.example:+80", "api.example", nil),
            ("api.example:http", "api.example", nil),
        ]
        for (authority, host, port) in cases {
            let split = ServerSpan.hostAndPort(authority)
            #expect(split.host == host && split.port == port, "\(authority)")
        }
        let long = ServerSpan.hostAndPort(String(repeating: "h", count: 300) + ":80")
        #expect(long.host == String(repeating: "h", count: 256) && long.port == 80, "the host's first 256 bytes")
    }
}
