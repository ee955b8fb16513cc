import Testing
import VeneerCore
@testable import VeneerServer

@Suite("Server-Timing")
struct ServerTimingTests {
    @Test("one metric per entry: the name, desc as a quoted-string when there is one, dur in milliseconds with one decimal")
    func format() {
        #expect(ServerTiming.value([]) == nil)
        let value = ServerTiming.value([
            .init(name: "latency_log", detail: "", duration: .microseconds(12_345)),
            .init(name: "cache", detail: "miss stored"),
            .init(name: "auth_refresh", detail: "token 41s left"),
            .init(name: "upstream", detail: "", duration: .microseconds(12_250)),
            .init(name: "mock", detail: "", duration: .nanoseconds(40_000)),
        ])
        #expect(value == #"latency_log;dur=12.3, cache;desc="miss stored", auth_refresh;desc="token 41s left", upstream;dur=12.3, mock;dur=0.0"#)
        #expect(ServerTiming.milliseconds(.seconds(2)) == "2000.0" && ServerTiming.milliseconds(.microseconds(1_950)) == "2.0")
    }

    @Test("desc escapes quotes and backslashes and drops control characters; a name that is not a token is made one")
    func escaping() {
        #expect(ServerTiming.quoted("say \"hi\" \\ bye") == #""say \"hi\" \\ bye""#)
        #expect(ServerTiming.quoted("a\r\nb\tc\u{7F}d\u{0}") == #""abcd""#)
        #expect(ServerTiming.value([.init(name: "my cache\",x", detail: "a\"b", duration: .milliseconds(1))])
                == #"my_cache__x;desc="a\"b";dur=1.0"#)
    }
}
