import Testing
import VeneerCore

@Suite("The syntax of allowed_hosts and allowed_origins, and of Host and Origin")
struct AuthoritySyntaxTests {
    @Test("allowed_hosts and allowed_origins syntax")
    func syntax() {
        for good in ["veneer.test", "veneer.test:8080", "[::1]:80", "10.0.0.1", "[2001:db8::1]"] { #expect(AuthoritySyntax.hostPattern(good) != nil, "\(good)") }
        for bad in ["*.example", "", "a b", "veneer.test:", "veneer.test:99999", "[::1", "[zz]", "host/path", "user@host"] {
            #expect(AuthoritySyntax.hostPattern(bad) == nil, "\(bad)")
        }
        #expect(AuthoritySyntax.hostPattern("Veneer.Test:8080")! == ("veneer.test", 8080) && AuthoritySyntax.hostPattern("[::1]")! == ("[::1]", nil))
        for good in ["http://localhost:3000", "https://app.example", "HTTP://[::1]:1"] { #expect(AuthoritySyntax.normalizedOrigin(good) != nil, "\(good)") }
        for bad in ["*", "null", "localhost:3000", "ftp://x", "http://", "http://a/b", "http://a:b"] {
            #expect(AuthoritySyntax.normalizedOrigin(bad) == nil, "\(bad)")
        }
        #expect(AuthoritySyntax.normalizedOrigin("HTTP://Localhost") == "http://localhost:80")
        #expect(AuthoritySyntax.normalizedOrigin("https://App.Example") == "https://app.example:443")
    }
}
