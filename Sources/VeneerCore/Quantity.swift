import Foundation

/// A number that comes from outside Veneer (a configuration value, a request header, a query
/// parameter, a HAR file, the command line), read with explicit bounds and checked arithmetic:
/// whatever the text, the result is a value within ``range`` or a ``QuantityError``, never a
/// trap. Every duration, size, count and percentage Veneer reads goes through this one type;
/// each key or field chooses its bounds (README, "Bounds of numbers").
public struct Bounded<Kind: QuantityKind>: Sendable, CustomStringConvertible {
    /// The values accepted, both ends included.
    public let range: ClosedRange<Kind.Value>

    /// Bounds from `range`.
    public init(_ range: ClosedRange<Kind.Value>) {
        self.range = range
    }

    /// The smallest value accepted.
    public var minimum: Kind.Value { range.lowerBound }
    /// The largest value accepted.
    public var maximum: Kind.Value { range.upperBound }

    /// Reads `text`: the value, or why it is not one within the bounds.
    public func parse(_ text: some StringProtocol) -> Result<Kind.Value, QuantityError> {
        switch Kind.read(Substring(text).trimmingSpaces) {
        case .malformed:
            return .failure(.malformed)
        case .beyond(let negative):
            return .failure(.outOfRange(self.description, below: negative))
        case .value(let value):
            if value < range.lowerBound { return .failure(.outOfRange(description, below: true)) }
            if value > range.upperBound { return .failure(.outOfRange(description, below: false)) }
            return .success(value)
        }
    }

    /// The value of `text` within the bounds, or nil.
    public func value(_ text: some StringProtocol) -> Kind.Value? {
        try? parse(text).get()
    }

    /// `0s...1d`, `4KB...64MB`, `1...1024`.
    public var description: String { "\(Kind.format(range.lowerBound))...\(Kind.format(range.upperBound))" }
}

/// Why a text is not a number within its bounds.
public enum QuantityError: Error, Sendable, Equatable {
    /// It is not a number of its kind at all (`soon`, `1e400s`, `nan`).
    case malformed
    /// It is one, but outside the bounds (`bounds` reads `0s...1d`); `below` when too small.
    case outOfRange(_ bounds: String, below: Bool)
}

/// What a text read as a quantity of some kind gives, before the bounds are applied.
public enum QuantityReading<Value> {
    /// The value (it may still be outside the bounds).
    case value(Value)
    /// A number too large (or, with `negative`, too small) for the kind to hold at all.
    case beyond(negative: Bool)
    /// Not a number of this kind.
    case malformed
}

/// A kind of quantity: how its text reads and how a value is written.
public protocol QuantityKind: Sendable {
    /// The type of the value.
    associatedtype Value: Comparable & Sendable
    /// Reads trimmed text.
    static func read(_ text: Substring) -> QuantityReading<Value>
    /// The shortest text that reads back as `value`.
    static func format(_ value: Value) -> String
}

/// Durations: `250ms`, `30s`, `5m`, `1h30m`, `1.5s`, `1d`, `0` (units `ns`, `us`/`µs`, `ms`,
/// `s`, `m`, `h`, `d`, one or more number-unit pairs). Precision is a nanosecond.
public enum Durations: QuantityKind {
    /// The largest duration any text reads as: what nanoseconds in an `Int64` hold (292 years).
    static let limit = Int128(Int64.max)

    public static func read(_ text: Substring) -> QuantityReading<Duration> {
        if text == "0" { return .value(.zero) }
        var rest = text
        let negative = rest.first == "-"
        if negative { rest = rest.dropFirst() }
        guard !rest.isEmpty else { return .malformed }
        var total: Int128 = 0
        var tooLarge = false
        while !rest.isEmpty {
            guard let (number, afterNumber) = Decimal.read(rest) else { return .malformed }
            let unit = afterNumber.prefix { ($0.isASCII && $0.isLetter) || $0 == "µ" }
            rest = afterNumber.dropFirst(unit.count)
            let nanoseconds: Int128
            switch unit {
            case "ns": nanoseconds = 1
            case "us", "µs": nanoseconds = 1000
            case "ms": nanoseconds = 1_000_000
            case "s": nanoseconds = 1_000_000_000
            case "m": nanoseconds = 60_000_000_000
            case "h": nanoseconds = 3_600_000_000_000
            case "d": nanoseconds = 86_400_000_000_000
            default: return .malformed
            }
            // Past the limit the text is still read to its end, so that `1e400s` is malformed
            // however large its number, and `99999999999h` is out of range.
            guard !tooLarge, let part = number.scaled(by: nanoseconds) else { tooLarge = true; continue }
            let (sum, overflow) = total.addingReportingOverflow(part)
            if overflow || sum > limit { tooLarge = true } else { total = sum }
        }
        if tooLarge { return .beyond(negative: negative) }
        let nanoseconds = Int64(total)
        return .value(.nanoseconds(negative ? -nanoseconds : nanoseconds))
    }

    public static func format(_ value: Duration) -> String { Units.format(value) }
}

/// Sizes in bytes: `512KB`, `10MB`, `1GB`, `1.5MB` or a plain number of bytes (`K`, `KB` and
/// `KiB` are 1024 bytes, and so on; any letter case; a space may stand before the unit).
public enum Sizes: QuantityKind {
    public static func read(_ text: Substring) -> QuantityReading<Int> {
        var rest = text
        let negative = rest.first == "-"
        if negative { rest = rest.dropFirst() }
        guard let (number, afterNumber) = Decimal.read(rest) else { return .malformed }
        let scale: Int128
        switch afterNumber.trimmingSpaces.uppercased() {
        case "", "B": scale = 1
        case "K", "KB", "KIB": scale = 1 << 10
        case "M", "MB", "MIB": scale = 1 << 20
        case "G", "GB", "GIB": scale = 1 << 30
        default: return .malformed
        }
        guard let bytes = number.scaled(by: scale, rounding: true), bytes <= Int128(Int.max) else { return .beyond(negative: negative) }
        return .value(negative ? -Int(bytes) : Int(bytes))
    }

    public static func format(_ value: Int) -> String { Units.format(bytes: value) }
}

/// Whole numbers: `16`, `-5`, `+3` (no fraction, no exponent).
public enum Counts: QuantityKind {
    public static func read(_ text: Substring) -> QuantityReading<Int> {
        var rest = text
        let negative = rest.first == "-"
        if negative || rest.first == "+" { rest = rest.dropFirst() }
        guard !rest.isEmpty, rest.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return .malformed }
        var value: Int128 = 0
        for digit in rest.utf8 {
            value = value * 10 + Int128(digit - 0x30)
            // Int.min's magnitude is one more than Int.max's.
            if value > Int128(Int.max) + 1 { return .beyond(negative: negative) }
        }
        let signed = negative ? -value : value
        guard let result = Int(exactly: signed) else { return .beyond(negative: negative) }
        return .value(result)
    }

    public static func format(_ value: Int) -> String { String(value) }
}

/// Percentages: `10`, `12.5`, `50%` (no exponent).
public enum Percentages: QuantityKind {
    public static func read(_ text: Substring) -> QuantityReading<Double> {
        var rest = text
        if rest.last == "%" { rest = rest.dropLast().trimmingSpaces }
        let negative = rest.first == "-"
        if negative { rest = rest.dropFirst() }
        guard let (_, after) = Decimal.read(rest), after.isEmpty else { return .malformed }
        // Digits with at most one point: Double reads them (infinite when there are hundreds).
        guard let magnitude = Double(String(rest)) else { return .malformed }
        guard magnitude.isFinite else { return .beyond(negative: negative) }
        return .value(negative ? -magnitude : magnitude)
    }

    public static func format(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }
}

/// Digits with at most one decimal point (`12`, `1.5`, `.5`, `3.`), read exactly: the whole
/// part and up to 18 digits of the fraction, with nothing that can overflow.
struct Decimal {
    /// The whole part, nil when it has more digits than any bound needs (read as too large).
    var whole: Int128?
    /// The fraction's digits as a number, and how many digits it has.
    var fraction: Int128 = 0
    var fractionDigits = 0

    /// The number at the start of `text` and what follows it; nil when there is none.
    static func read(_ text: Substring) -> (Decimal, Substring)? {
        var number = Decimal(whole: 0)
        var index = text.startIndex
        var digits = 0
        var point = false
        while index < text.endIndex, let ascii = text[index].asciiValue {
            if ascii == UInt8(ascii: ".") {
                if point { break }
                point = true
            } else if ascii >= 0x30, ascii <= 0x39 {
                let digit = Int128(ascii - 0x30)
                digits += 1
                if point {
                    if number.fractionDigits < 18 {
                        number.fraction = number.fraction * 10 + digit
                        number.fractionDigits += 1
                    }
                } else if let whole = number.whole {
                    // 30 digits are far beyond any bound and far within an Int128.
                    number.whole = whole > 100_000_000_000_000_000_000_000_000 ? nil : whole * 10 + digit
                }
            } else {
                break
            }
            index = text.index(after: index)
        }
        guard digits > 0 else { return nil }
        return (number, text[index...])
    }

    /// The number times `scale` (at most 10^14: a day in nanoseconds, a gigabyte), the
    /// fraction truncated (or rounded half up); nil when that overflows.
    func scaled(by scale: Int128, rounding: Bool = false) -> Int128? {
        guard let whole else { return nil }
        let (product, overflow) = whole.multipliedReportingOverflow(by: scale)
        guard !overflow else { return nil }
        var tenth: Int128 = 1
        for _ in 0..<fractionDigits { tenth *= 10 }
        // fraction < 10^18 and scale <= 10^14: the product stays below 10^32 < 2^127.
        let numerator = fraction * scale
        let part = rounding ? (numerator * 2 + tenth) / (tenth * 2) : numerator / tenth
        let (sum, overflowed) = product.addingReportingOverflow(part)
        return overflowed ? nil : sum
    }
}

/// The texts of durations and sizes, and their widest reading (for code that applies bounds of
/// its own afterwards; every key of the configuration has bounds of its own).
public enum Units {
    /// The widest duration bounds: zero up to what an `Int64` of nanoseconds holds.
    public static let anyDuration = Bounded<Durations>(.zero ... .nanoseconds(Int64.max))
    /// The widest size bounds.
    public static let anySize = Bounded<Sizes>(0...Int.max)

    /// Parses a duration; nil when `text` is not one (or is negative, or beyond 292 years).
    public static func duration(_ text: String) -> Duration? { anyDuration.value(text) }

    /// Parses a size in bytes (`K`/`KB`/`KiB` = 1024 bytes, and so on); nil when `text` is not one.
    public static func size(_ text: String) -> Int? { anySize.value(text) }

    /// `250ms`, `30s`, `5m`, `1h30m`, `2d`: the shortest exact text for a duration (in days
    /// only when it is a whole number of days).
    public static func format(_ duration: Duration) -> String {
        let parts = duration.components
        let total = Int128(parts.seconds) * 1_000_000_000 + Int128(parts.attoseconds / 1_000_000_000)
        if total == 0 { return "0s" }
        if total < 0 { return "-" + format(.nanoseconds(Int64(clamping: -total))) }
        if total % 1_000_000_000 != 0 {
            if total % 1_000_000 == 0 { return "\(total / 1_000_000)ms" }
            if total % 1000 == 0 { return "\(total / 1000)us" }
            return "\(total)ns"
        }
        var seconds = total / 1_000_000_000
        var out = ""
        if seconds >= 86_400, seconds % 86_400 == 0 { return "\(seconds / 86_400)d" }
        if seconds >= 3600 { out += "\(seconds / 3600)h"; seconds %= 3600 }
        if seconds >= 60 { out += "\(seconds / 60)m"; seconds %= 60 }
        if seconds > 0 { out += "\(seconds)s" }
        return out
    }

    /// `512KB`, `10MB`, or bytes: the shortest exact text for a size.
    public static func format(bytes: Int) -> String {
        for (unit, scale) in [("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)] where bytes >= scale && bytes % scale == 0 {
            return "\(bytes / scale)\(unit)"
        }
        return "\(bytes)B"
    }
}

extension Duration {
    /// `days` days.
    public static func days(_ days: Int64) -> Duration { .seconds(days * 86_400) }

    /// `seconds` (from a clock or a date, possibly huge, infinite or NaN) as a duration within
    /// `range`: what code that waits or reports uses, so that no far-off date traps.
    public static func clamping(seconds: Double, to range: ClosedRange<Duration>) -> Duration {
        guard !seconds.isNaN else { return range.lowerBound }
        if seconds <= range.lowerBound.seconds { return range.lowerBound }
        if seconds >= range.upperBound.seconds { return range.upperBound }
        let nanoseconds = (seconds * 1e9).rounded()
        // Double(Int64.max) rounds up to 2^63, which no Int64 holds.
        return nanoseconds < 9.2e18 ? .nanoseconds(Int64(nanoseconds)) : range.upperBound
    }
}

extension Date {
    /// The seconds since 1970 of the years 1 to 9999: what dates are written as, whatever the date.
    public static let epochSecondsOfYears = -62_135_596_800...253_402_300_799

    /// A date read back from a store (seconds since 1970), nil when it is not a number of a
    /// year from 1 to 9999: a store may be shared with other versions, or damaged.
    public init?(epochSeconds: Double) {
        guard epochSeconds.isFinite, Double(Self.epochSecondsOfYears.lowerBound) <= epochSeconds,
              epochSeconds <= Double(Self.epochSecondsOfYears.upperBound) else { return nil }
        self.init(timeIntervalSince1970: epochSeconds)
    }
}

extension Int {
    /// `value` (seconds since something, an age: a `Double` that may be huge, infinite or
    /// NaN) as a whole number, rounded down, within `range`: never a trap.
    public static func clamping(_ value: Double, to range: ClosedRange<Int>) -> Int {
        guard !value.isNaN else { return range.lowerBound }
        let down = value.rounded(.down)
        if down <= Double(range.lowerBound) { return range.lowerBound }
        // Double(Int.max) rounds up to 2^63, which no Int holds.
        if down >= Double(range.upperBound) { return range.upperBound }
        return Int(down)
    }
}
