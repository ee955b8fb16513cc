import Testing
import VeneerCore

@Suite("RequestRedaction: the one rule for request data shown or written outside its exchange")
struct RequestRedactionTests {
    let shown = RequestRedaction.shown
    let written = RequestRedaction.written

    @Test("credential headers are cut whatever they hold; a fingerprint tells two values apart and reveals neither")
    func headers() {
        for name in ["Authorization", "proxy-authorization", "Cookie", "Set-Cookie", "X-Api-Key", "X-Auth-Token", "X-Session-Id", "X-Client-Secret"] {
            #expect(written.header(name, "abc") == "<redacted>", "\(name)")
            #expect(shown.header(name, "abc").hasPrefix("<redacted:"), "\(name)")
        }
        #expect(shown.header("Authorization", "Bearer a") != shown.header("Authorization", "Bearer b"))
        #expect(shown.header("Authorization", "Bearer a") == shown.header("Authorization", "Bearer a"))
        #expect(RequestRedaction.fingerprint("x").count == 8)
        #expect(RequestRedaction(marker: .plain, extraHeaders: ["x-account"]).header("X-Account", "1") == "<redacted>")
        // Other headers keep their value, with the credentials they carry cut.
        #expect(written.header("Content-Type", "application/json") == "application/json")
        #expect(written.header("X-Forwarded-Auth", "Bearer abc123xyz") == "Bearer <redacted>")
        #expect(written.header("Location", "/cb?code=1&access_token=abc#x") == "/cb?code=1&access_token=<redacted>#x")
        #expect(written.header("Accept", "text/html;q=0.9") == "text/html;q=0.9")
    }

    @Test("queries: sensitive parameters cut by name (percent-encoded too), others kept; the request lists show the path only")
    func queries() {
        #expect(written.query("page=2&access_token=abc&flag&API%5FKEY=k&key=1&monkey=2") == "page=2&access_token=<redacted>&flag&API%5FKEY=<redacted>&key=<redacted>&monkey=2")
        #expect(written.query("state=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl") == "state=<redacted>")
        #expect(written.pairs("a=1&b").map(\.name) == ["a", "b"] && written.pairs("a=1&b").map(\.value) == ["1", nil])
        #expect(RequestRedaction.path(ofTarget: "/posts?access_token=x") == "/posts?…")
        #expect(RequestRedaction.path(ofTarget: "/posts/1") == "/posts/1")
        #expect(RequestRedaction.pathWithoutQuery("/posts?x") == "/posts")
    }

    @Test("JSON: every value under a sensitive member at any depth, shape kept; credentials in other strings")
    func json() throws {
        let value = try JSONValue.parse(#"{"id":1,"refresh_tokens":["a",{"v":"b"}],"session":{"id":"c","n":7,"ok":true},"note":"Bearer abcdef123","Cookie":"sid=1"}"#)
        #expect(written.json(value).text
            == #"{"id":1,"refresh_tokens":["<redacted>",{"v":"<redacted>"}],"session":{"id":"<redacted>","n":"<redacted>","ok":true},"note":"Bearer <redacted>","Cookie":"<redacted>"}"#)
    }

    @Test("free text: Bearer and Basic credentials, JWTs and sensitive parameters are cut; prose is not", arguments: [
        ("Authorization: Bearer abc.DEF-123", "Authorization: Bearer <redacted>"),
        ("basic dXNlcjpwYXNz here", "basic <redacted> here"),
        ("Basic authentication is simple", "Basic authentication is simple"),
        ("the bearer instrument", "the bearer instrument"),
        ("x eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl y", "x <redacted> y"),
        ("see https://a.test/x?password=hunter2&q=1", "see https://a.test/x?password=<redacted>&q=1"),
        ("<a href=\"/cb?token=t1\">", "<a href=\"/cb?token=<redacted>\">"),
        ("mytoken=1 notatoken", "mytoken=<redacted> notatoken"),
        ("plain text with = signs, a=b", "plain text with = signs, a=b"),
        ("", ""),
    ])
    func text(_ input: String, _ expected: String) {
        #expect(written.text(input) == expected)
    }

    @Test("what counts as a sensitive name")
    func names() {
        for name in ["access_token", "refreshToken", "client_secret", "PASSWORD", "passwd", "api-key", "apikey", "credentials", "sessionid",
                     "key", "sig", "X-Amz-Signature", "private_key", "aws_access_key_id", "signing_key", "jwt"] {
            #expect(RequestRedaction.isSensitive(name), "\(name)")
        }
        for name in ["id", "title", "page", "monkey", "author", "keyword", "userId", "q"] {
            #expect(!RequestRedaction.isSensitive(name), "\(name)")
        }
    }
}
