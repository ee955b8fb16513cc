import HTTPTypes
import Testing
import VeneerCore

@Suite("Addresses, endpoints and ids")
struct AddressTests {
    @Test("IPv4 and IPv6 addresses parse and print canonically", arguments: [
        ("127.0.0.1", "127.0.0.1"), ("::1", "::1"), ("2001:db8:0:0:0:0:2:1", "2001:db8::2:1"),
        ("::ffff:10.0.0.1", "::ffff:a00:1"), ("fe80::", "fe80::"), ("1:0:0:2:0:0:0:3", "1:0:0:2::3"),
    ])
    func parse(_ text: String, _ printed: String) throws {
        let address = try #require(ClientAddress(text))
        #expect(address.description == printed)
    }

    @Test("malformed addresses are rejected", arguments: ["256.0.0.1", "1.2.3", "01.2.3.4", "1::2::3", "::g", "", "1.2.3.4.5", "fe80::1%eth0"])
    func malformed(_ text: String) {
        #expect(ClientAddress(text) == nil)
    }

    @Test("loopback covers 127/8, ::1 and mapped IPv4 loopback")
    func loopback() throws {
        #expect(try #require(ClientAddress("127.4.5.6")).isLoopback)
        #expect(try #require(ClientAddress("::1")).isLoopback)
        #expect(try #require(ClientAddress("::ffff:127.0.0.1")).isLoopback)
        #expect(try !#require(ClientAddress("10.0.0.1")).isLoopback)
    }

    @Test("upstream URLs parse into endpoints")
    func endpoints() throws {
        let plain = try #require(Endpoint(url: "https://api.example.com"))
        #expect(plain.port == 443 && plain.basePath == "" && plain.authority == "api.example.com")
        let prefixed = try #require(Endpoint(url: "http://127.0.0.1:9000/v1/"))
        #expect(prefixed.port == 9000 && prefixed.basePath == "/v1" && prefixed.authority == "127.0.0.1:9000")
        let v6 = try #require(Endpoint(url: "http://[::1]:81"))
        #expect(v6.host == "::1" && v6.authority == "[::1]:81")
        for bad in ["ftp://x", "http://", "http://user:pw@x", "http://x?q=1", "http://x:0", "http://x:99999", "api.example.com"] {
            #expect(Endpoint(url: bad) == nil, "\(bad)")
        }
    }

    @Test("ids: posts take positive integers without a leading zero (refused, never rewritten), string ids take unreserved characters but never dot segments")
    func ids() {
        for refused in ["007", "0", "00", "01", ""] { #expect(Resource.posts.canonicalID(Substring(refused)) == nil, "\(refused)") }
        #expect(Resource.posts.canonicalID("10") == "10")
        #expect(Resource.posts.canonicalID("9223372036854775807") == "9223372036854775807")
        #expect(Resource.posts.canonicalID("-1") == nil)
        #expect(Resource.posts.canonicalID("1.css") == nil)
        #expect(Resource.posts.canonicalID("99999999999999999999") == nil)
        #expect(Resource.posts.canonicalID("9223372036854775808") == nil && Resource.posts.canonicalID("9999999999999999999") == nil)
        #expect(Resource.posts.canonicalID("1000000000000000000") == "1000000000000000000")
        #expect(Resource.posts.canonicalID("１") == nil && Resource.posts.canonicalID("1 ") == nil)
        let comments = Resource(name: "comments", kind: .string)
        #expect(comments.canonicalID("a-b_c.d~e") == "a-b_c.d~e")
        #expect(comments.canonicalID("..") == nil)
        #expect(comments.canonicalID(".") == nil)
        #expect(comments.canonicalID("...") == "..." && comments.canonicalID(".a") == ".a")
        #expect(comments.canonicalID(Substring(String(repeating: "x", count: 200))) != nil)
        #expect(comments.canonicalID(Substring(String(repeating: "x", count: 201))) == nil)
        #expect(comments.canonicalID("é") == nil && comments.canonicalID("") == nil)
        #expect(comments.canonicalID("a%2f") == nil)
        #expect(comments.canonicalID("a;b") == nil)
    }
}
