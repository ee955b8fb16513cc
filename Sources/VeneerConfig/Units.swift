import Foundation
import VeneerCore

/// Durations (`250ms`, `30s`, `5m`, `1h`, `1h30m`, `0`) and sizes (`512KB`, `10MB`, bytes).
public enum Units {
    /// Parses a duration; nil when `text` is not one.
    public static func duration(_ text: String) -> Duration? {
        let text = text.trimmingSpaces
        if text == "0" { return .zero }
        guard !text.isEmpty else { return nil }
        var total = Duration.zero
        var rest = Substring(text)
        while !rest.isEmpty {
            let number = rest.prefix { $0.isASCII && ($0.isNumber || $0 == ".") }
            guard !number.isEmpty, let value = Double(number), value.isFinite else { return nil }
            rest = rest.dropFirst(number.count)
            let unit = rest.prefix { $0.isASCII && $0.isLetter }
            rest = rest.dropFirst(unit.count)
            let scale: Double
            switch unit {
            case "ns": scale = 1e-9
            case "us", "µs": scale = 1e-6
            case "ms": scale = 1e-3
            case "s": scale = 1
            case "m": scale = 60
            case "h": scale = 3600
            case "d": scale = 86400
            default: return nil
            }
            let seconds = value * scale
            guard seconds < 1e10 else { return nil }
            total += .nanoseconds(Int64((seconds * 1e9).rounded()))
        }
        return total
    }

    /// Parses a size in bytes (`K`/`KB`/`KiB` = 1024 bytes, and so on); nil when `text` is not one.
    public static func size(_ text: String) -> Int? {
        let text = text.trimmingSpaces
        let number = text.prefix { $0.isASCII && ($0.isNumber || $0 == ".") }
        guard !number.isEmpty, let value = Double(number), value.isFinite else { return nil }
        let unit = text.dropFirst(number.count).trimmingSpaces.uppercased()
        let scale: Double
        switch unit {
        case "", "B": scale = 1
        case "K", "KB", "KIB": scale = 1024
        case "M", "MB", "MIB": scale = 1024 * 1024
        case "G", "GB", "GIB": scale = 1024 * 1024 * 1024
        default: return nil
        }
        let bytes = value * scale
        guard bytes < 1e15 else { return nil }
        return Int(bytes.rounded())
    }

    /// `250ms`, `30s`, `5m`, `1h30m`: the shortest exact text for a duration.
    public static func format(_ duration: Duration) -> String {
        let totalNanos = duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000
        if totalNanos == 0 { return "0s" }
        if totalNanos % 1_000_000_000 != 0 {
            if totalNanos % 1_000_000 == 0 { return "\(totalNanos / 1_000_000)ms" }
            return "\(totalNanos / 1000)us"
        }
        var seconds = totalNanos / 1_000_000_000
        var out = ""
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

/// "Did you mean" for unknown names.
public enum Suggestions {
    /// The candidate closest to `name`, if it is close enough to be a likely typo.
    public static func closest(to name: String, in candidates: [String]) -> String? {
        let lower = name.lowercased()
        var best: (String, Int)?
        for candidate in candidates {
            let distance = editDistance(lower, candidate.lowercased())
            if distance < (best?.1 ?? .max) { best = (candidate, distance) }
        }
        guard let best else { return nil }
        let limit = max(2, min(name.count, best.0.count) / 3)
        if best.1 <= limit { return best.0 }
        // An abbreviation ('prod' for 'production') is a likely slip too.
        if lower.count >= 3, let prefixed = candidates.first(where: { $0.lowercased().hasPrefix(lower) }) { return prefixed }
        // So is another form of a name ('caching' for 'cache', 'latency_logging'): the name
        // begins with the whole candidate but for its last letter.
        return candidates.filter { $0.count >= 4 && lower.hasPrefix($0.lowercased().dropLast()) }.max { $0.count < $1.count }
    }

    /// ` (did you mean 'x'?)` or `` — ready to append to a message.
    public static func hint(for name: String, in candidates: [String]) -> String {
        closest(to: name, in: candidates).map { " (did you mean '\($0)'?)" } ?? ""
    }

    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous = Array(0...b.count)
        var current = previous
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }
}
