import Synchronization
import VeneerCore

/// The budgets of one `rate_limit` entry: a token bucket per key, refilled at the options'
/// rate up to their burst. Carried over reloads (``BuildContext/carried``), so that a reload
/// does not hand every caller a fresh budget.
///
/// At most `maxKeys` buckets are kept: a new key beyond that replaces the bucket untouched
/// the longest (a full bucket is the same as none; one refilling is forgotten a little early).
final class RateBook: Sendable {
    private struct Bucket {
        var tokens: Double
        /// When it was last refilled, on the monotonic clock.
        var updated: Duration
    }

    private struct State {
        var buckets: [String: Bucket] = [:]
    }

    let options: RateLimitOptions
    private let state = Mutex(State())
    /// The requests let through and refused, for the status page.
    let tally = StatusTally(["allowed", "limited"])

    init(options: RateLimitOptions) {
        self.options = options
    }

    /// Tokens per second.
    private var rate: Double { Double(options.requests) / Self.seconds(options.period) }

    /// Takes a token for `key` at `now`: nil when there was one, else how long until there is.
    func take(_ key: String, now: Duration) -> Duration? {
        let (rate, burst, maxKeys) = (self.rate, Double(options.burst), options.maxKeys)
        let wait: Duration? = state.withLock { state in
            var bucket = state.buckets[key] ?? Bucket(tokens: burst, updated: now)
            bucket.tokens = min(burst, bucket.tokens + Self.seconds(now - bucket.updated) * rate)
            bucket.updated = now
            if state.buckets[key] == nil, state.buckets.count >= maxKeys,
               let quietest = state.buckets.min(by: { $0.value.updated < $1.value.updated })?.key {
                state.buckets[quietest] = nil
            }
            defer { state.buckets[key] = bucket }
            guard bucket.tokens >= 1 else { return .nanoseconds(Int64((1 - bucket.tokens) / rate * 1e9)) }
            bucket.tokens -= 1
            return nil
        }
        tally.add(wait == nil ? "allowed" : "limited")
        return wait
    }

    /// The keys with a bucket and the whole tokens each has at `now`, in key order.
    func budgets(at now: Duration) -> [(key: String, tokens: Int)] {
        let (rate, burst) = (self.rate, Double(options.burst))
        return state.withLock { state in
            state.buckets.map { key, bucket in (key, Int(min(burst, bucket.tokens + Self.seconds(now - bucket.updated) * rate))) }
        }.sorted { $0.key < $1.key }
    }

    /// Gives `key` (every key, when nil) its whole burst again; returns how many buckets went.
    func reset(_ key: String?) -> Int {
        state.withLock { state in
            guard let key else {
                defer { state.buckets.removeAll() }
                return state.buckets.count
            }
            return state.buckets.removeValue(forKey: key) == nil ? 0 : 1
        }
    }

    private static func seconds(_ duration: Duration) -> Double {
        let parts = duration.components
        return Double(parts.seconds) + Double(parts.attoseconds) / 1e18
    }
}
