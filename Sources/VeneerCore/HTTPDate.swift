import Foundation
import NIOCore

/// Calendar arithmetic without Foundation's formatters (which are slow and locale-bound).
enum CivilDate {
    /// (year, month, day) of a day number counted from 1970-01-01 (Howard Hinnant's algorithm).
    static func fromDays(_ days: Int) -> (year: Int, month: Int, day: Int) {
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthPart = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthPart + 2) / 5 + 1
        let month = monthPart < 10 ? monthPart + 3 : monthPart - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// The day number (from 1970-01-01) of a date.
    static func toDays(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    static func pad(_ value: Int, _ width: Int) -> String {
        let text = String(value)
        return text.count >= width ? text : String(repeating: "0", count: width - text.count) + text
    }
}

/// HTTP dates (RFC 9110 §5.6.7): IMF-fixdate out (the server's `Date`); IMF-fixdate, RFC 850
/// and asctime in (the cache's `Date`, `Expires`, `Last-Modified`, `If-Modified-Since`).
///
/// Package-level: its two users, the server and the cache, have no module in common below
/// them but this one, and both directions of the grammar stay together (the `cache-headers`
/// fuzz target checks that they agree). It is no part of the contract a decorator sees.
package enum HTTPDate {
    static let weekdays = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]
    static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// `Sun, 06 Nov 1994 08:49:37 GMT` for seconds since 1970.
    public static func format(_ epochSeconds: Int) -> String {
        let days = epochSeconds >= 0 ? epochSeconds / 86400 : (epochSeconds - 86399) / 86400
        let secondOfDay = epochSeconds - days * 86400
        let (year, month, day) = CivilDate.fromDays(days)
        let weekday = weekdays[((days % 7) + 7) % 7]
        return "\(weekday), \(CivilDate.pad(day, 2)) \(months[month - 1]) \(CivilDate.pad(year, 4)) "
            + "\(CivilDate.pad(secondOfDay / 3600, 2)):\(CivilDate.pad(secondOfDay % 3600 / 60, 2)):\(CivilDate.pad(secondOfDay % 60, 2)) GMT"
    }

    /// `format` of a `Date`.
    public static func format(_ date: Date) -> String { format(Int.clamping(date.timeIntervalSince1970, to: Date.epochSecondsOfYears)) }

    /// Parses an HTTP-date (RFC 9110 §5.6.7) exactly: IMF-fixdate (`Sun, 06 Nov 1994 08:49:37
    /// GMT`), or one of the obsolete RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime
    /// (`Sun Nov  6 08:49:37 1994`) formats. Letters are compared without regard to case, as
    /// RFC 9111 §4.2 asks of caches; anything else is refused: other spacing, dashes in
    /// IMF-fixdate, one-digit hours, two-digit years outside RFC 850, other zones, impossible
    /// days. An RFC 850 year more than 50 years after `reference` is the century before.
    public static func parse(_ text: String, reference: Date = Date()) -> Date? {
        var text = text
        return text.withUTF8 { bytes -> Date? in
            var reader = DateReader(bytes: bytes)
            return reader.httpDate(referenceYear: { CivilDate.fromDays(Int((reference.timeIntervalSince1970 / 86400).rounded(.down))).year })
        }
    }

    /// Seconds since 1970 of a checked calendar date and time of day; nil for a day the month does not have.
    static func epoch(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int) -> Date? {
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let lengths = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        guard (1...12).contains(month), (1...lengths[month - 1]).contains(day), hour <= 23, minute <= 59, second <= 60 else { return nil }
        let days = CivilDate.toDays(year: year, month: month, day: day)
        return Date(timeIntervalSince1970: TimeInterval(days * 86400 + hour * 3600 + minute * 60 + second))
    }
}

/// Reads the three HTTP-date formats byte by byte, consuming exactly what the grammar allows.
private struct DateReader {
    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0

    static let longDays = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
    static let shortDays = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
    static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    init(bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    mutating func httpDate(referenceYear: () -> Int) -> Date? {
        // day-name (3 letters), day-name-l (RFC 850) or asctime's day-name followed by a space.
        guard let name = letters() else { return nil }
        if Self.shortDays.contains(name) {
            if take(UInt8(ascii: ",")) {
                // IMF-fixdate: ", " 2DIGIT " " month " " 4DIGIT " " time " GMT"
                guard take(0x20), let day = digits(2), take(0x20), let month = month(), take(0x20), let year = digits(4), take(0x20),
                      let (hour, minute, second) = time(), take(0x20), gmt(), atEnd else { return nil }
                return HTTPDate.epoch(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
            }
            // asctime: " " month " " (2DIGIT / " " DIGIT) " " time " " 4DIGIT
            guard take(0x20), let month = month(), take(0x20) else { return nil }
            let day: Int
            if take(0x20) {
                guard let digit = digits(1) else { return nil }
                day = digit
            } else {
                guard let two = digits(2) else { return nil }
                day = two
            }
            guard take(0x20), let (hour, minute, second) = time(), take(0x20), let year = digits(4), atEnd else { return nil }
            return HTTPDate.epoch(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
        }
        // RFC 850: day-name-l ", " 2DIGIT "-" month "-" 2DIGIT " " time " GMT"
        guard Self.longDays.contains(name), take(UInt8(ascii: ",")), take(0x20), let day = digits(2), take(UInt8(ascii: "-")),
              let month = month(), take(UInt8(ascii: "-")), let shortYear = digits(2), take(0x20), let (hour, minute, second) = time(),
              take(0x20), gmt(), atEnd else { return nil }
        // RFC 9110 §5.6.7: a year that appears more than 50 years in the future is the most
        // recent past year with the same last two digits.
        let current = referenceYear()
        var year = current - current % 100 + shortYear
        if year > current + 50 { year -= 100 }
        return HTTPDate.epoch(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
    }

    var atEnd: Bool { index == bytes.count }

    mutating func take(_ byte: UInt8) -> Bool {
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    /// A run of ASCII letters, lower-cased.
    mutating func letters() -> String? {
        let start = index
        while index < bytes.count, (bytes[index] | 0x20) >= UInt8(ascii: "a"), (bytes[index] | 0x20) <= UInt8(ascii: "z") { index += 1 }
        guard index > start, index - start <= 9 else { return nil }
        return String(decoding: bytes[start..<index].map { $0 | 0x20 }, as: UTF8.self)
    }

    /// Exactly `count` digits.
    mutating func digits(_ count: Int) -> Int? {
        guard index + count <= bytes.count else { return nil }
        var value = 0
        for offset in 0..<count {
            let byte = bytes[index + offset]
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
        }
        index += count
        return value
    }

    /// A three-letter month, 1 to 12.
    mutating func month() -> Int? {
        guard index + 3 <= bytes.count else { return nil }
        let name = String(decoding: bytes[index..<index + 3].map { $0 | 0x20 }, as: UTF8.self)
        guard let month = Self.months.firstIndex(of: name) else { return nil }
        index += 3
        return month + 1
    }

    /// `HH:MM:SS`, two digits each (ranges checked with the date).
    mutating func time() -> (Int, Int, Int)? {
        guard let hour = digits(2), take(UInt8(ascii: ":")), let minute = digits(2), take(UInt8(ascii: ":")), let second = digits(2) else { return nil }
        return (hour, minute, second)
    }

    /// `GMT`, in any case.
    mutating func gmt() -> Bool {
        guard index + 3 <= bytes.count, bytes[index] | 0x20 == UInt8(ascii: "g"), bytes[index + 1] | 0x20 == UInt8(ascii: "m"),
              bytes[index + 2] | 0x20 == UInt8(ascii: "t") else { return false }
        index += 3
        return true
    }
}

/// Time formatting for log lines.
public enum Timestamp {
    /// `2026-11-22T10:15:30.123Z`.
    public static func iso8601(_ date: Date) -> String {
        String(unsafeUninitializedCapacity: iso8601Length) { iso8601(date, into: UnsafeMutableRawBufferPointer($0)) }
    }

    /// ``iso8601(_:)`` written into `buffer`, without making a string: a log line's time.
    public static func writeISO8601(_ date: Date, into buffer: inout ByteBuffer) {
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: iso8601Length) { iso8601(date, into: $0) }
    }

    /// ``iso8601(_:)`` at `cursor`: 24 bytes.
    package static func appendISO8601(_ date: Date, to cursor: inout ByteCursor) {
        cursor.append(upTo: iso8601Length) { iso8601(date, into: $0) }
    }

    /// ``milliseconds(_:)`` at `cursor`: at most ``millisecondsLength`` bytes.
    package static func appendMilliseconds(_ duration: Duration, to cursor: inout ByteCursor) {
        let parts = duration.components
        let micros = parts.seconds * 1_000_000 + parts.attoseconds / 1_000_000_000_000
        guard micros >= 0 else {
            cursor.append(milliseconds(duration))
            return
        }
        cursor.appendDecimal(Int(micros / 1000))
        let fraction = Int(micros % 1000)
        cursor.append(byte: UInt8(ascii: "."))
        cursor.append(byte: UInt8(ascii: "0") + UInt8(fraction / 100))
        cursor.append(byte: UInt8(ascii: "0") + UInt8(fraction / 10 % 10))
        cursor.append(byte: UInt8(ascii: "0") + UInt8(fraction % 10))
    }

    /// At most how many bytes ``appendMilliseconds(_:to:)`` writes.
    package static let millisecondsLength = 48

    /// Always 24 bytes: the years are clamped to 0001...9999.
    package static let iso8601Length = 24

    /// Writes ``iso8601(_:)``'s bytes at the start of `out`; how many.
    private static func iso8601(_ date: Date, into out: UnsafeMutableRawBufferPointer) -> Int {
        let years = Date.epochSecondsOfYears
        let millis = Int.clamping(date.timeIntervalSince1970 * 1000, to: (years.lowerBound * 1000)...(years.upperBound * 1000 + 999))
        let days = millis >= 0 ? millis / 86_400_000 : (millis - 86_399_999) / 86_400_000
        let msOfDay = millis - days * 86_400_000
        let (year, month, day) = CivilDate.fromDays(days)
        let seconds = msOfDay / 1000
        func digits(_ value: Int, _ width: Int, at offset: Int) {
            var rest = value
            for index in stride(from: offset + width - 1, through: offset, by: -1) {
                out[index] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
            }
        }
        digits(year, 4, at: 0)
        out[4] = UInt8(ascii: "-")
        digits(month, 2, at: 5)
        out[7] = UInt8(ascii: "-")
        digits(day, 2, at: 8)
        out[10] = UInt8(ascii: "T")
        digits(seconds / 3600, 2, at: 11)
        out[13] = UInt8(ascii: ":")
        digits(seconds % 3600 / 60, 2, at: 14)
        out[16] = UInt8(ascii: ":")
        digits(seconds % 60, 2, at: 17)
        out[19] = UInt8(ascii: ".")
        digits(msOfDay % 1000, 3, at: 20)
        out[23] = UInt8(ascii: "Z")
        return iso8601Length
    }

    /// Milliseconds with three decimals: `12.345`.
    public static func milliseconds(_ duration: Duration) -> String {
        let parts = duration.components
        let micros = parts.seconds * 1_000_000 + parts.attoseconds / 1_000_000_000_000
        return "\(micros / 1000).\(CivilDate.pad(Int(micros % 1000), 3))"
    }

    /// ``milliseconds(_:)`` written into `buffer`, without making a string.
    public static func writeMilliseconds(_ duration: Duration, into buffer: inout ByteBuffer) {
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: millisecondsLength) { out in
            var cursor = ByteCursor(out, reserved: millisecondsLength)
            appendMilliseconds(duration, to: &cursor)
            return cursor.offset
        }
    }
}
