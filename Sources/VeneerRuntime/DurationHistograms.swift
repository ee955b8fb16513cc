import CoreMetrics
import Prometheus
import Synchronization

/// The duration histograms behind `/-/metrics` (swift-metrics `Timer`s:
/// `veneer_request_duration_seconds`, `veneer_upstream_request_duration_seconds`), kept apart
/// from the Prometheus registry and written after it, line for line as swift-prometheus's
/// `DurationHistogram` writes them.
///
/// Its histogram recorded a request under a lock by comparing the time, as a `Duration`, with
/// each of the 14 bounds and counting every bucket it fits, some 750 instructions per
/// `latency_log` request (callgrind); here a request costs a scan of integer bounds and one
/// short lock.
final class DurationHistogramRegistry: Sendable {
    private struct Family {
        let help: String
        let bounds: [Duration]
        /// In the order they were made.
        var series: [FixedDurationHistogram] = []
    }

    private let families = Mutex<[String: Family]>([:])

    init() {}

    /// The histogram `name` with `labels` (made, or the one made before: a chain's rebuild
    /// continues its series). Every series of a family shares its first one's help and buckets.
    func make(name: String, help: String, labels: [(String, String)], buckets: [Duration]) -> FixedDurationHistogram {
        families.withLock { families in
            var family = families[name] ?? Family(help: help, bounds: buckets)
            if let made = family.series.first(where: { $0.sameLabels(labels) }) { return made }
            let histogram = FixedDurationHistogram(name: name, labels: labels, bounds: family.bounds)
            family.series.append(histogram)
            families[name] = family
            return histogram
        }
    }

    /// Takes `histogram` out of the exposition.
    func unregister(_ histogram: FixedDurationHistogram) {
        families.withLock { families in
            guard var family = families[histogram.name] else { return }
            family.series.removeAll { $0 === histogram }
            families[histogram.name] = family.series.isEmpty ? nil : family
        }
    }

    /// Each family's `# HELP` and `# TYPE` lines and its series, families by name.
    func emit(into buffer: inout [UInt8]) {
        let snapshot = families.withLock { $0 }
        for name in snapshot.keys.sorted() {
            let family = snapshot[name]!
            if !family.help.isEmpty {
                buffer.append(contentsOf: "# HELP \(name) ".utf8)
                for byte in family.help.utf8 {
                    if byte == UInt8(ascii: "\\") { buffer.append(contentsOf: #"\\"#.utf8) } else { buffer.append(byte) }
                }
                buffer.append(UInt8(ascii: "\n"))
            }
            buffer.append(contentsOf: "# TYPE \(name) histogram\n".utf8)
            for histogram in family.series { histogram.emit(into: &buffer) }
        }
    }
}

/// One series of a duration histogram: counts per bucket (not cumulative until written), the
/// count and the sum (a `Duration`, as swift-prometheus keeps it: 64-bit nanoseconds would wrap
/// after some 292 years of summed time, months of uptime for a busy series).
final class FixedDurationHistogram: TimerHandler, Sendable {
    let name: String
    let labels: [(String, String)]
    /// The buckets' upper bounds, inclusive, as written (`le`), and `+Inf`.
    private let bucketTexts: [String]
    /// The same in nanoseconds, rounded down: a time of whole nanoseconds (what a `Timer`
    /// records) is at most a bound exactly when it is at most the bound rounded down.
    private let boundNanoseconds: [Int64]
    /// `name="value",...` escaped as swift-prometheus escapes label values.
    private let renderedLabels: [UInt8]

    private struct Counts {
        /// One per bound, and one past the last.
        var buckets: [Int]
        var count = 0
        var sum: Duration = .zero
    }

    private let counts: Mutex<Counts>

    init(name: String, labels: [(String, String)], bounds: [Duration]) {
        self.name = name
        self.labels = labels
        bucketTexts = bounds.map(\.bucketRepresentation) + ["+Inf"]
        boundNanoseconds = bounds.map { bound in
            let parts = bound.components
            // Bounds are positive: their attoseconds divided down are rounded down.
            return parts.seconds * 1_000_000_000 + parts.attoseconds / 1_000_000_000
        }
        var rendered: [UInt8] = []
        for (index, (key, value)) in labels.enumerated() {
            if index > 0 { rendered.append(UInt8(ascii: ",")) }
            rendered.append(contentsOf: key.utf8)
            rendered.append(contentsOf: #"=""#.utf8)
            for byte in value.utf8 {
                switch byte {
                case UInt8(ascii: "\\"): rendered.append(contentsOf: #"\\"#.utf8)
                case UInt8(ascii: "\""): rendered.append(contentsOf: #"\""#.utf8)
                case UInt8(ascii: "\n"): rendered.append(contentsOf: #"\n"#.utf8)
                default: rendered.append(byte)
                }
            }
            rendered.append(UInt8(ascii: "\""))
        }
        renderedLabels = rendered
        counts = Mutex(Counts(buckets: Array(repeating: 0, count: bounds.count + 1)))
    }

    func sameLabels(_ other: [(String, String)]) -> Bool {
        labels.count == other.count && zip(labels, other).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
    }

    /// Counts `nanoseconds` in the first bucket whose bound it does not exceed.
    func recordNanoseconds(_ nanoseconds: Int64) {
        var index = 0
        boundNanoseconds.withUnsafeBufferPointer { bounds in
            while index < bounds.count, nanoseconds > bounds[index] { index += 1 }
        }
        counts.withLock { counts in
            counts.buckets.withUnsafeMutableBufferPointer { $0[index] += 1 }
            counts.count += 1
            counts.sum += .nanoseconds(nanoseconds)
        }
    }

    /// The series' lines, as swift-prometheus's `Histogram` writes them: each bucket's
    /// cumulative count, `+Inf`'s, the sum (as `Duration.bucketRepresentation`) and the count.
    func emit(into buffer: inout [UInt8]) {
        let counts = self.counts.withLock { $0 }
        var cumulative = 0
        // The last bucket, past every bound, is `+Inf`: its cumulative count is the count.
        for (le, count) in zip(bucketTexts, counts.buckets) {
            cumulative += count
            buffer.append(contentsOf: name.utf8)
            buffer.append(contentsOf: "_bucket{".utf8)
            if !renderedLabels.isEmpty {
                buffer.append(contentsOf: renderedLabels)
                buffer.append(UInt8(ascii: ","))
            }
            buffer.append(contentsOf: "le=\"\(le)\"} \(cumulative)\n".utf8)
        }
        for (suffix, value) in [("_sum", counts.sum.bucketRepresentation), ("_count", "\(counts.count)")] {
            buffer.append(contentsOf: name.utf8)
            buffer.append(contentsOf: suffix.utf8)
            if renderedLabels.isEmpty {
                buffer.append(UInt8(ascii: " "))
            } else {
                buffer.append(UInt8(ascii: "{"))
                buffer.append(contentsOf: renderedLabels)
                buffer.append(contentsOf: "} ".utf8)
            }
            buffer.append(contentsOf: "\(value)\n".utf8)
        }
    }
}
