import Foundation
import NIOCore
import Testing
import VeneerCore
import VeneerTestSupport

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

    @Test("RFC 9110 §5.6.7: only exact HTTP-dates are read", arguments: [
        "Sun, 06-Nov-1994 08:49:37 GMT",     // dashes in IMF-fixdate
        "Sun,  06 Nov 1994 08:49:37 GMT",    // an extra space
        "Sun, 06 Nov 1994 08:49:37 GMT ",    // a trailing space
        " Sun, 06 Nov 1994 08:49:37 GMT",    // a leading space
        "Sun, 6 Nov 1994 08:49:37 GMT",      // a one-digit day in IMF-fixdate
        "Sun, 06 Nov 1994 8:49:37 GMT",      // a one-digit hour
        "Sun, 06 Nov 94 08:49:37 GMT",       // a two-digit year outside RFC 850
        "Sun Nov  6 08:49:37 94",            // a two-digit year in asctime
        "Sunday, 06-Nov-1994 08:49:37 GMT",  // a four-digit year in RFC 850
        "Sunday, 06 Nov 1994 08:49:37 GMT",  // a long day name in IMF-fixdate
        "Sun Nov 6 08:49:37 1994",           // asctime with one space before a one-digit day
        "Sun, 31 Nov 1994 08:49:37 GMT",     // a day November does not have
        "Sun, 29 Feb 1995 08:49:37 GMT",     // nor February in a common year
        "Sun, 06 Nov 1994 08:49:37 +0000",   // another zone
        "Sun, 06 Nov 1994 08:49:37",         // no zone
        "Sun, 06 Nov 1994 08:49:37 GMT+1", "1994-11-06T08:49:37Z", "784111777", "",
    ])
    func refused(_ text: String) {
        #expect(HTTPDate.parse(text) == nil)
    }

    @Test("RFC 9110 §5.6.7, RFC 9111 §4.2: day and month names and GMT are read in any case; RFC 850 years follow the 50-year rule")
    func lenientCase() throws {
        for text in ["sun, 06 nov 1994 08:49:37 gmt", "SUN, 06 NOV 1994 08:49:37 GMT", "SUNDAY, 06-NOV-94 08:49:37 GMT", "sun nov  6 08:49:37 1994",
                     "Sun Nov 06 08:49:37 1994"] {
            #expect(try #require(HTTPDate.parse(text)).timeIntervalSince1970 == 784_111_777, "\(text)")
        }
        #expect(HTTPDate.parse("Thu, 29 Feb 2024 00:00:00 GMT") != nil)
        let recent = try #require(HTTPDate.parse("Monday, 02-Jan-23 00:00:00 GMT"))
        #expect(Timestamp.iso8601(recent).hasPrefix("2023-01-02"))
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

    @Test("a log line's time and duration written into its buffer read as the strings do", arguments: [
        (-62_135_596_800.0, "0001-01-01T00:00:00.000Z"), (-1e15, "0001-01-01T00:00:00.000Z"), (-1.5, "1969-12-31T23:59:58.500Z"),
        (0, "1970-01-01T00:00:00.000Z"), (951_782_400.5, "2000-02-29T00:00:00.500Z"), (1_795_000_000.25, "2026-11-18T11:06:40.250Z"),
        (253_402_300_799.5, "9999-12-31T23:59:59.500Z"), (1e15, "9999-12-31T23:59:59.999Z"),
    ])
    func isoIntoBuffer(seconds: Double, expected: String) {
        let date = Date(timeIntervalSince1970: seconds)
        var buffer = ByteBuffer(string: "x")
        Timestamp.writeISO8601(date, into: &buffer)
        #expect(String(buffer: buffer) == "x" + expected)
        #expect(Timestamp.iso8601(date) == expected)
        for duration: Duration in [.zero, .microseconds(5), .microseconds(12_345), .seconds(seconds.magnitude.truncatingRemainder(dividingBy: 1e6))] {
            var line = ByteBuffer()
            Timestamp.writeMilliseconds(duration, into: &line)
            #expect(String(buffer: line) == Timestamp.milliseconds(duration))
        }
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
