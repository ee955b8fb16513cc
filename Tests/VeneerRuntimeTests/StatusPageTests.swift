import Foundation
import Testing
import VeneerCore
@testable import VeneerRuntime

@Suite("the status page's pieces")
struct StatusPageTests {
    @Test("escaping: markup, quotes and control characters from outside are text")
    func escaping() {
        #expect(StatusPage.escape("<img src=x onerror=\"alert('1')\">&") == "&lt;img src=x onerror=&quot;alert(&#39;1&#39;)&quot;&gt;&amp;")
        #expect(StatusPage.escape("a\u{1B}[31mb\nc") == "a\u{FFFD}[31mb\u{FFFD}c")
        #expect(StatusPage.escape("café ✓") == "café ✓")
    }

    @Test("an account becomes one path segment of the unblock form's action")
    func accountSegment() {
        #expect(StatusPage.percentEncoded("a/b?c#d e") == "a%2Fb%3Fc%23d%20e")
        #expect(StatusPage.percentEncoded("acct-13_x~") == "acct-13_x~")
        #expect(StatusPage.percentEncoded("..") == "%2E%2E" && StatusPage.percentEncoded("a.b") == "a%2Eb", "a browser would resolve . and .. away")
        #expect(StatusPage.percentEncoded("é") == "%C3%A9")
    }

    @Test("StatusTally counts by name, ignores names it does not have, and lists its figures in order")
    func tally() {
        let tally = StatusTally(["hit", "miss"])
        tally.add("hit")
        tally.add("hit", 2)
        tally.add("miss")
        tally.add("other")
        #expect(tally["hit"] == 3 && tally["miss"] == 1 && tally["other"] == 0)
        #expect(tally.figures == [StatusFigure("hit", 3), StatusFigure("miss", 1)])
        // By index in its names, as the cache counts (an index it does not have is ignored).
        tally.add(at: 1)
        tally.add(at: 0, 2)
        tally.add(at: 2)
        tally.add(at: -1)
        #expect(tally.figures == [StatusFigure("hit", 5), StatusFigure("miss", 2)])
    }

    @Test("every page gets a fresh nonce of 16 random bytes")
    func nonce() {
        let first = StatusPage.nonce(), second = StatusPage.nonce()
        #expect(first.count == 32 && first != second)
    }
}
