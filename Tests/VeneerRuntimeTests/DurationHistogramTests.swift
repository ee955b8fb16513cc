import CoreMetrics
import Prometheus
import Testing
@testable import VeneerRuntime

@Suite("Duration histograms: written as swift-prometheus writes them")
struct DurationHistogramTests {
    static let buckets = DescribedMetricsFactory(registry: PrometheusCollectorRegistry()).defaultDurationBuckets

    /// Times on each side of the bounds, on them, past the last, and zero.
    static let times: [Int64] = {
        var times: [Int64] = [0, 1, 999, 73_123_456_789, 10_000_000_001, 1 << 40]
        for bound in buckets {
            let nanos = bound.components.seconds * 1_000_000_000 + bound.components.attoseconds / 1_000_000_000
            times += [nanos - 1, nanos, nanos, nanos + 1]
        }
        return times
    }()

    @Test("a series' lines, HELP and TYPE are swift-prometheus's, byte for byte, with and without labels")
    func sameText() {
        let labelSets: [[(String, String)]] = [
            [("label", "edge \"one\"\\\n"), ("method", "GET"), ("route", "/posts/{id}"), ("status", "200")],
            [("label", "0"), ("method", "DELETE"), ("route", "/posts"), ("status", "504")],
        ]
        for (name, labelSet) in [("veneer_request_duration_seconds", labelSets), ("veneer_upstream_request_duration_seconds", [[]])] {
            // Byte for byte, one series at a time; then all of a family's series together, as
            // lines: swift-prometheus lists a family's series in its dictionary's order, which
            // changes from one process to the next (ours lists them as they were made).
            for labels in labelSet {
                let (expected, written) = Self.texts(name: name, labelSets: [labels])
                #expect(written == expected)
            }
            let (expected, written) = Self.texts(name: name, labelSets: labelSet)
            #expect(written.split(separator: "\n").sorted() == expected.split(separator: "\n").sorted())
            #expect(written.hasPrefix("# HELP \(name) ") && expected.hasPrefix("# HELP \(name) "))
        }
    }

    /// The texts of swift-prometheus's registry and of ours, each given the same `times` for a
    /// series per label set of `name`.
    static func texts(name: String, labelSets: [[(String, String)]], times: [Int64] = times) -> (expected: String, written: String) {
        let registry = PrometheusCollectorRegistry()
        let ours = DurationHistogramRegistry()
        let help = "Time spent \\ somewhere."
        for labels in labelSets {
            let theirs = registry.makeDurationHistogram(descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help),
                                                        labels: labels, buckets: buckets)
            let mine = ours.make(name: name, help: help, labels: labels, buckets: buckets)
            for time in times {
                theirs.recordNanoseconds(time)
                mine.recordNanoseconds(time)
            }
        }
        var expected: [UInt8] = [], written: [UInt8] = []
        registry.emit(into: &expected)
        ours.emit(into: &written)
        return (String(decoding: expected, as: UTF8.self), String(decoding: written, as: UTF8.self))
    }

    @Test("a sum past 2^63 nanoseconds is written as swift-prometheus writes it, not wrapped")
    func largeSum() {
        let (expected, text) = Self.texts(name: "veneer_x_seconds", labelSets: [[]], times: Array(repeating: Int64.max / 2, count: 5))
        #expect(text == expected)
        #expect(text.contains("veneer_x_seconds_sum 23058430092."), "\(text)")
    }

    @Test("a series asked for again is the same one, and an unregistered one leaves the text")
    func reuseAndUnregister() {
        let ours = DurationHistogramRegistry()
        let labels = [("label", "a")]
        let first = ours.make(name: "veneer_request_duration_seconds", help: "h", labels: labels, buckets: Self.buckets)
        #expect(ours.make(name: "veneer_request_duration_seconds", help: "h", labels: labels, buckets: Self.buckets) === first)
        let other = ours.make(name: "veneer_request_duration_seconds", help: "h", labels: [("label", "b")], buckets: Self.buckets)
        #expect(other !== first)
        ours.unregister(first)
        var text: [UInt8] = []
        ours.emit(into: &text)
        let written = String(decoding: text, as: UTF8.self)
        #expect(!written.contains(#"label="a""#) && written.contains(#"label="b""#))
        ours.unregister(other)
        text = []
        ours.emit(into: &text)
        #expect(text.isEmpty)
    }

    @Test("the factory's timers land in its histograms, not in the registry")
    func factoryTimers() {
        let registry = PrometheusCollectorRegistry()
        let factory = DescribedMetricsFactory(registry: registry)
        let timer = CoreMetrics.Timer(label: "veneer_request_duration_seconds", dimensions: [("label", "x")], factory: factory)
        timer.recordNanoseconds(2_000_000)
        var text: [UInt8] = []
        factory.histograms.emit(into: &text)
        #expect(String(decoding: text, as: UTF8.self).contains(#"veneer_request_duration_seconds_bucket{label="x",le="0.002"} 1"#))
        #expect(!registry.emitToString().contains("veneer_request_duration_seconds"))
    }
}
