import Foundation

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

/// HTTP dates (RFC 9110 §5.6.7): IMF-fixdate out; IMF-fixdate, RFC 850 and asctime in.
public enum HTTPDate {
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
    public static func format(_ date: Date) -> String { format(Int(date.timeIntervalSince1970.rounded(.down))) }

    /// Parses any of the three HTTP date formats; nil when it is none of them.
    public static func parse(_ text: String) -> Date? {
        if let fixed = parseFixdate(text) { return fixed }
        return parseAnyFormat(text)
    }

    /// IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`, what servers send today) read at fixed
    /// positions; nil for anything else, which the general parser then tries.
    static func parseFixdate(_ text: String) -> Date? {
        var text = text
        return text.withUTF8 { bytes -> Date? in
            guard bytes.count == 29, bytes[3] == UInt8(ascii: ","), bytes[4] == 0x20, bytes[7] == 0x20, bytes[11] == 0x20,
                  bytes[16] == 0x20, bytes[19] == UInt8(ascii: ":"), bytes[22] == UInt8(ascii: ":"), bytes[25] == 0x20,
                  bytes[26] == UInt8(ascii: "G"), bytes[27] == UInt8(ascii: "M"), bytes[28] == UInt8(ascii: "T") else { return nil }
            func number(_ start: Int, _ count: Int) -> Int? {
                var value = 0
                for index in start..<(start + count) {
                    let digit = bytes[index]
                    guard digit >= UInt8(ascii: "0"), digit <= UInt8(ascii: "9") else { return nil }
                    value = value * 10 + Int(digit - UInt8(ascii: "0"))
                }
                return value
            }
            let monthText = String(decoding: UnsafeBufferPointer(rebasing: bytes[8..<11]), as: UTF8.self)
            guard let day = number(5, 2), let year = number(12, 4), let hour = number(17, 2), let minute = number(20, 2),
                  let second = number(23, 2), let month = months.firstIndex(of: monthText),
                  (1...31).contains(day), hour <= 23, minute <= 59, second <= 60 else { return nil }
            let days = CivilDate.toDays(year: year, month: month + 1, day: day)
            return Date(timeIntervalSince1970: TimeInterval(days * 86400 + hour * 3600 + minute * 60 + second))
        }
    }

    static func parseAnyFormat(_ text: String) -> Date? {
        let parts = text.split(separator: " ", omittingEmptySubsequences: true)
        var day = 0, month = 0, year = 0
        var time: Substring = ""
        if parts.count == 6, parts[0].hasSuffix(","), parts[5] == "GMT" {
            // IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT
            guard let d = Int(parts[1]), let m = months.firstIndex(of: String(parts[2])), let y = Int(parts[3]) else { return nil }
            (day, month, year, time) = (d, m + 1, y, parts[4])
        } else if parts.count == 4, parts[0].hasSuffix(","), parts[3] == "GMT" {
            // RFC 850: Sunday, 06-Nov-94 08:49:37 GMT
            let dateParts = parts[1].split(separator: "-")
            guard dateParts.count == 3, let d = Int(dateParts[0]), let m = months.firstIndex(of: String(dateParts[1])),
                  var y = Int(dateParts[2]) else { return nil }
            if y < 100 { y += y < 70 ? 2000 : 1900 }
            (day, month, year, time) = (d, m + 1, y, parts[2])
        } else if parts.count == 5 {
            // asctime: Sun Nov  6 08:49:37 1994
            guard let m = months.firstIndex(of: String(parts[1])), let d = Int(parts[2]), let y = Int(parts[4]) else { return nil }
            (day, month, year, time) = (d, m + 1, y, parts[3])
        } else {
            return nil
        }
        let clock = time.split(separator: ":")
        guard clock.count == 3, let hour = Int(clock[0]), let minute = Int(clock[1]), let second = Int(clock[2]),
              (1...31).contains(day), (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second) else { return nil }
        let days = CivilDate.toDays(year: year, month: month, day: day)
        return Date(timeIntervalSince1970: TimeInterval(days * 86400 + hour * 3600 + minute * 60 + second))
    }
}

/// Time formatting for log lines.
public enum Timestamp {
    /// `2026-11-22T10:15:30.123Z`.
    public static func iso8601(_ date: Date) -> String {
        let millis = Int((date.timeIntervalSince1970 * 1000).rounded(.down))
        let days = millis >= 0 ? millis / 86_400_000 : (millis - 86_399_999) / 86_400_000
        let msOfDay = millis - days * 86_400_000
        let (year, month, day) = CivilDate.fromDays(days)
        let seconds = msOfDay / 1000
        return "\(CivilDate.pad(year, 4))-\(CivilDate.pad(month, 2))-\(CivilDate.pad(day, 2))T"
            + "\(CivilDate.pad(seconds / 3600, 2)):\(CivilDate.pad(seconds % 3600 / 60, 2)):\(CivilDate.pad(seconds % 60, 2))."
            + "\(CivilDate.pad(msOfDay % 1000, 3))Z"
    }

    /// Milliseconds with three decimals: `12.345`.
    public static func milliseconds(_ duration: Duration) -> String {
        let parts = duration.components
        let micros = parts.seconds * 1_000_000 + parts.attoseconds / 1_000_000_000_000
        return "\(micros / 1000).\(CivilDate.pad(Int(micros % 1000), 3))"
    }
}
