import Foundation
import Testing
import VeneerCore

@Suite("HTTP dates and timestamps")
struct TimeTests {
    @Test("formats IMF-fixdate and parses all three HTTP date formats")
    func httpDates() throws {
        #expect(HTTPDate.format(784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
        for text in ["Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"] {
            #expect(try #require(HTTPDate.parse(text)).timeIntervalSince1970 == 784_111_777, "\(text)")
        }
        #expect(HTTPDate.parse("yesterday") == nil)
        #expect(HTTPDate.parse("Sun, 32 Nov 1994 08:49:37 GMT") == nil)
        for bad in ["Sun, 06 Nox 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:49:37 GMT", "Sun, 0x Nov 1994 08:49:37 GMT",
                    "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 06 Nov 1994 08:60:37 GMT"] {
            #expect(HTTPDate.parse(bad) == nil, "\(bad)")
        }
    }

    @Test("the fixed-position reading of IMF-fixdate agrees with the general parser", arguments: Array(stride(from: 0, to: 4_000_000_000, by: 97_654_321)))
    func fixdateAgrees(seconds: Int) throws {
        let text = HTTPDate.format(seconds)
        #expect(try #require(HTTPDate.parse(text)).timeIntervalSince1970 == TimeInterval(seconds), "\(text)")
    }

    @Test("ISO 8601 timestamps with milliseconds")
    func iso() {
        #expect(Timestamp.iso8601(Date(timeIntervalSince1970: 1_795_000_000.123)) == "2026-11-18T11:06:40.123Z")
        #expect(Timestamp.milliseconds(.microseconds(12_345)) == "12.345")
        #expect(Timestamp.milliseconds(.microseconds(5)) == "0.005")
    }

    @Test("the manual clock wakes sleepers only when advanced past their deadline")
    func manualClock() async throws {
        let clock = ManualClock()
        let start = clock.now()
        let task = Task { try await clock.sleep(for: .seconds(10)) }
        while clock.sleeperCount == 0 { await Task.yield() }
        clock.advance(by: .seconds(5))
        #expect(clock.sleeperCount == 1)
        clock.advance(by: .seconds(5))
        try await task.value
        #expect(clock.sleeperCount == 0)
        #expect(clock.now().timeIntervalSince(start) == 10)
    }
}
