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
            let registry = PrometheusCollectorRegistry()
            let ours = DurationHistogramRegistry()
            let help = "Time spent \\ somewhere."
            for labels in labelSet {
                let theirs = registry.makeDurationHistogram(descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help),
                                                            labels: labels, buckets: Self.buckets)
                let mine = ours.make(name: name, help: help, labels: labels, buckets: Self.buckets)
                for time in Self.times {
                    theirs.recordNanoseconds(time)
                    mine.recordNanoseconds(time)
                }
            }
            var expected: [UInt8] = [], written: [UInt8] = []
            registry.emit(into: &expected)
            ours.emit(into: &written)
            #expect(String(decoding: written, as: UTF8.self) == String(decoding: expected, as: UTF8.self))
        }
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
