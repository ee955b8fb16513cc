import Foundation
import NIOCore
import Synchronization

/// The last 15 minutes of the chain's answers per environment, in 10-second buckets, for the
/// status page's charts: request rate, cache hit ratio, and p50 and p99 latency.
///
/// Bounded whatever the traffic: per environment a ring of 90 buckets, each a count and a
/// fixed histogram of latencies (48 bins, each a third of an octave wide, from 0.1 ms), so a
/// percentile is read to within a bin (±13%). One short lock per answer.
public final class TrafficHistory: Sendable {
    /// The width of a bucket.
    public static let bucketSeconds = 10
    /// Buckets kept: 15 minutes.
    public static let bucketCount = 90
    /// Latency bins: bin `i` holds durations up to `0.1 ms × 2^((i+1)/3)`; the last, the rest.
    static let binCount = 48

    struct Bucket {
        /// Which 10 seconds it holds (monotonic uptime / 10 s); -1 for none.
        var slot: Int64 = -1
        var count = 0
        /// Answers with a `Cache-Status` (a cache decided), and those that were hits.
        var cached = 0
        var hits = 0
        var latencies = [UInt32](repeating: 0, count: TrafficHistory.binCount)
    }

    private struct State {
        /// The environments answers were or are noted for, and their rings (empty until the
        /// first answer), index for index; `serving` indexes the current one, so that noting
        /// an answer hashes no name.
        var names = [""]
        var rings: [[Bucket]] = [[]]
        var serving = 0
    }

    private let state = Mutex(State())
    private let origin: NIODeadline

    /// An empty history, timed from now.
    public init(origin: NIODeadline = .now()) {
        self.origin = origin
    }

    /// Answers from now on belong to `environment` (the first chain, a switch).
    public func serving(_ environment: String) {
        state.withLock { state in
            if let index = state.names.firstIndex(of: environment) {
                state.serving = index
            } else {
                state.names.append(environment)
                state.rings.append([])
                state.serving = state.names.count - 1
            }
        }
    }

    func slot(_ instant: NIODeadline) -> Int64 {
        max(0, (instant - origin).nanoseconds) / (Int64(Self.bucketSeconds) * 1_000_000_000)
    }

    func elapsed(_ instant: NIODeadline) -> Double { Double(max(0, (instant - origin).nanoseconds)) / 1e9 }

    /// The bins' upper bounds in nanoseconds: a bin is found by comparing integers, not by a
    /// logarithm per answer.
    static let upperNanoseconds: [Int64] = (0..<binCount).map { Int64(upperBound($0) * 1e6) }

    /// The bin of `duration`: the first whose upper bound it does not pass.
    static func bin(_ duration: Duration) -> Int {
        let parts = duration.components
        guard parts.seconds < 1_000_000 else { return binCount - 1 }
        return bin(nanoseconds: parts.seconds * 1_000_000_000 + parts.attoseconds / 1_000_000_000)
    }

    /// The bin of a duration of `nanoseconds`. The edge passes its nanoseconds: taking a
    /// `Duration` apart divides 128-bit attoseconds, some 250 instructions an answer.
    static func bin(nanoseconds: Int64) -> Int {
        // The table read once: each read of the lazy global inside the loop was a
        // `swift_once` check, one per bin passed.
        let upper = upperNanoseconds
        var index = 0
        while index < binCount - 1, nanoseconds > upper[index] { index += 1 }
        return index
    }

    /// The upper bound of bin `index`, in milliseconds.
    static func upperBound(_ index: Int) -> Double { 0.1 * pow(2, Double(index + 1) / 3) }

    /// Notes an answer given at `answered`, after `duration`, with `cacheStatus` (if a cache decided).
    public func record(answered: NIODeadline, duration: Duration, cacheStatus: String?) {
        record(answered: answered, bin: Self.bin(duration), cacheStatus: cacheStatus)
    }

    /// ``record(answered:duration:cacheStatus:)`` with the duration in nanoseconds.
    func record(answered: NIODeadline, nanoseconds: Int64, cacheStatus: String?) {
        record(answered: answered, bin: Self.bin(nanoseconds: nanoseconds), cacheStatus: cacheStatus)
    }

    private func record(answered: NIODeadline, bin: Int, cacheStatus: String?) {
        let slot = slot(answered)
        let cached = cacheStatus != nil, hit = cacheStatus.map(Self.isHit) ?? false
        let index = Int(slot % Int64(Self.bucketCount))
        state.withLock { state in
            let serving = state.serving
            if state.rings[serving].isEmpty { state.rings[serving] = Array(repeating: Bucket(), count: Self.bucketCount) }
            state.rings[serving][index].add(slot: slot, bin: bin, cached: cached, hit: hit)
        }
    }

    /// A hit of RFC 9211 (`veneer; hit`), fresh or served stale.
    static func isHit(_ status: String) -> Bool {
        // Byte by byte over the string's own storage: String.contains with Foundation imported
        // goes through CFString, and a generic `starts(with:)` per position over the UTF-8 view
        // still cost more than the rest of this per-answer bookkeeping (measured with perf).
        var status = status
        return status.withUTF8 { bytes in
            let count = bytes.count
            var index = 0
            while index + 5 <= count {
                if bytes[index] == UInt8(ascii: ";"), bytes[index + 1] == UInt8(ascii: " "), bytes[index + 2] == UInt8(ascii: "h"),
                   bytes[index + 3] == UInt8(ascii: "i"), bytes[index + 4] == UInt8(ascii: "t"),
                   index + 5 == count || bytes[index + 5] == UInt8(ascii: ";") {
                    return true
                }
                index += 1
            }
            return false
        }
    }

    /// What the charts of `environment` show, oldest bucket first, ending with the current one.
    public struct Series: Sendable, Equatable {
        /// Requests a second.
        public var rate: [Double]
        /// Hits among the answers a cache decided, 0...1; nil where none was.
        public var hitRatio: [Double?]
        /// Median latency in milliseconds; nil where there was no request.
        public var p50: [Double?]
        /// 99th percentile latency in milliseconds; nil where there was no request.
        public var p99: [Double?]
    }

    /// The series of `environment` up to `now`.
    public func series(_ environment: String, now: NIODeadline = .now()) -> Series {
        let current = slot(now)
        let ring = state.withLock { state in state.names.firstIndex(of: environment).map { state.rings[$0] } } ?? []
        var series = Series(rate: [], hitRatio: [], p50: [], p99: [])
        for offset in stride(from: Int64(Self.bucketCount - 1), through: 0, by: -1) {
            let slot = current - offset
            let bucket = slot >= 0 && !ring.isEmpty ? ring[Int(slot % Int64(Self.bucketCount))] : Bucket()
            guard bucket.slot == slot, bucket.count > 0 else {
                series.rate.append(0)
                series.hitRatio.append(nil)
                series.p50.append(nil)
                series.p99.append(nil)
                continue
            }
            // The current bucket over the part of it that has passed: the curve moves at once.
            let seconds = offset == 0 ? min(Double(Self.bucketSeconds), max(1, elapsed(now) - Double(slot) * Double(Self.bucketSeconds)))
                : Double(Self.bucketSeconds)
            series.rate.append(Double(bucket.count) / seconds)
            series.hitRatio.append(bucket.cached > 0 ? Double(bucket.hits) / Double(bucket.cached) : nil)
            series.p50.append(bucket.percentile(0.5))
            series.p99.append(bucket.percentile(0.99))
        }
        return series
    }
}

extension TrafficHistory.Bucket {
    mutating func add(slot: Int64, bin: Int, cached: Bool, hit: Bool) {
        if self.slot != slot { self = TrafficHistory.Bucket(slot: slot) }
        count += 1
        if cached { self.cached += 1 }
        if hit { hits += 1 }
        latencies[bin] &+= 1
    }

    /// The upper bound of the bin where `quantile` of the answers falls, in milliseconds.
    func percentile(_ quantile: Double) -> Double {
        let wanted = max(1, Int((quantile * Double(count)).rounded(.up)))
        var seen = 0
        for (index, number) in latencies.enumerated() {
            seen += Int(number)
            if seen >= wanted { return TrafficHistory.upperBound(index) }
        }
        return TrafficHistory.upperBound(TrafficHistory.binCount - 1)
    }
}
