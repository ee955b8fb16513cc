import Foundation
import Testing
import VeneerCore

/// The one parser of numbers from outside: exact, bounded, never a trap.
@Suite("Quantities: durations, sizes, counts and percentages within bounds")
struct QuantityTests {
    static let day = Bounded<Durations>(.zero ... .days(1))

    @Test("durations read exactly, in every unit, summed and with fractions", arguments: [
        ("0", Duration.zero), ("0s", .zero), ("250ms", .milliseconds(250)), ("1.5s", .milliseconds(1500)), ("1h30m", .seconds(5400)),
        ("2d", .days(2)), ("1ns", .nanoseconds(1)), ("3us", .microseconds(3)), ("3µs", .microseconds(3)), (".5s", .milliseconds(500)),
        ("0.1s", .milliseconds(100)), ("1.000000001s", .nanoseconds(1_000_000_001)), ("9223372036854775807ns", .nanoseconds(Int64.max)),
    ])
    func durations(_ text: String, _ value: Duration) {
        #expect(Units.anyDuration.value(text) == value)
        #expect(Units.duration(Units.format(value)) == value, "\(Units.format(value)) reads back")
    }

    @Test("past the bounds, or past what nanoseconds hold, a duration is out of range, never a trap", arguments: [
        "9300000000s", "9300000000000ms", "155000000m", "2600000h", "9223372036854775808s", "9223372036854775808ns",
        "99999999999999999999999999999999999999999s", "1d1ns", "25h", "-1s", "-0.5ms",
    ])
    func outOfRange(_ text: String) {
        guard case .failure(.outOfRange(let bounds, _)) = Self.day.parse(text) else {
            Issue.record("\(text): \(Self.day.parse(text))")
            return
        }
        #expect(bounds == "0s...1d")
    }

    @Test("what is not a duration is malformed", arguments: ["", "soon", "5", "1e400s", "1e3s", "nan", "inf", "1.2.3s", "1 h", "s", "1hh", "--1s", "1s-"])
    func malformed(_ text: String) {
        #expect(Self.day.parse(text) == .failure(.malformed), "\(text)")
    }

    @Test("sizes: binary units in any case, fractions rounded to a byte, out of range past the bounds")
    func sizes() {
        let bounds = Bounded<Sizes>((4 << 10)...(64 << 20))
        #expect(bounds.value("4KB") == 4096 && bounds.value("64MB") == 64 << 20 && bounds.value("1.5 mib") == 1_572_864)
        #expect(bounds.parse("4095") == .failure(.outOfRange("4KB...64MB", below: true)))
        #expect(bounds.parse("67108865") == .failure(.outOfRange("4KB...64MB", below: false)))
        #expect(bounds.parse("9223372036854775808") == .failure(.outOfRange("4KB...64MB", below: false)))
        #expect(bounds.parse("99999999999999999999GB") == .failure(.outOfRange("4KB...64MB", below: false)))
        #expect(bounds.parse("-1") == .failure(.outOfRange("4KB...64MB", below: true)))
        #expect(bounds.parse("1e400") == .failure(.malformed) && bounds.parse("lots") == .failure(.malformed))
        #expect(Units.size("9223372036854775807") == Int.max && Units.size("8589934592GB") == nil)
    }

    @Test("counts: whole numbers, the whole Int and no further, no fraction or exponent")
    func counts() {
        let any = Bounded<Counts>(Int.min...Int.max)
        #expect(any.value("9223372036854775807") == Int.max && any.value("-9223372036854775808") == Int.min && any.value("+5") == 5)
        #expect(any.parse("9223372036854775808") == .failure(.outOfRange("-9223372036854775808...9223372036854775807", below: false)))
        #expect(any.parse("-9223372036854775809") == .failure(.outOfRange("-9223372036854775808...9223372036854775807", below: true)))
        for text in ["1.5", "1e3", "", "-", "0x10", "1 000"] { #expect(any.parse(text) == .failure(.malformed), "\(text)") }
        #expect(Bounded<Counts>(1...1024).parse("0") == .failure(.outOfRange("1...1024", below: true)))
    }

    @Test("percentages: 0 to 100, a fraction and % allowed, no exponent")
    func percentages() {
        let bounds = Bounded<Percentages>(0...100)
        #expect(bounds.value("12.5") == 12.5 && bounds.value("50%") == 50 && bounds.value("100") == 100)
        #expect(bounds.parse("100.5") == .failure(.outOfRange("0...100", below: false)))
        #expect(bounds.parse("-1") == .failure(.outOfRange("0...100", below: true)))
        #expect(bounds.parse("1" + String(repeating: "0", count: 400)) == .failure(.outOfRange("0...100", below: false)))
        #expect(bounds.parse("1e2") == .failure(.malformed) && bounds.parse("nan") == .failure(.malformed))
    }

    @Test("clamping a Double to an Int or a Duration: huge, infinite and NaN values never trap")
    func clamping() {
        #expect(Int.clamping(9.223372036854775807e18, to: 0...Int.max) == Int.max)
        #expect(Int.clamping(.infinity, to: 0...10) == 10 && Int.clamping(-.infinity, to: 0...10) == 0 && Int.clamping(.nan, to: 0...10) == 0)
        #expect(Int.clamping(3.9, to: 0...10) == 3 && Int.clamping(-3.5, to: Int.min...Int.max) == -4)
        #expect(Duration.clamping(seconds: 1e300, to: .milliseconds(1) ... .seconds(1)) == .seconds(1))
        #expect(Duration.clamping(seconds: 9.3e9, to: .zero ... .nanoseconds(Int64.max)) == .nanoseconds(Int64.max))
        #expect(Duration.clamping(seconds: 0.25, to: .zero ... .seconds(1)) == .milliseconds(250))
        #expect(Date(epochSeconds: 1e300) == nil && Date(epochSeconds: .nan) == nil && Date(epochSeconds: 0) == Date(timeIntervalSince1970: 0))
        #expect(HTTPDate.format(Date(timeIntervalSince1970: 1e300)) == "Fri, 31 Dec 9999 23:59:59 GMT")
    }
}
