import Foundation
import VeneerCore

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
