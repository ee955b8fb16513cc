import CoreMetrics
import Prometheus

import VeneerConfig

/// The swift-metrics factory behind `/-/metrics`: Prometheus's own factory creates every
/// family without a `# HELP` line (and its registry refuses a second family of one name with
/// another help), so this one creates them in the registry with their help: the runtime's own
/// from the ``MetricCatalog``, the decorators' and origins' as their factories declare it.
struct DescribedMetricsFactory: MetricsFactory {
    let registry: PrometheusCollectorRegistry
    /// The duration histograms (`Timer`s), apart from `registry`: see ``DurationHistogramRegistry``.
    let histograms: DurationHistogramRegistry
    /// The help of the families the registered decorators and origins declare.
    var declared: [String: String] = [:]
    /// Buckets of duration histograms (`Timer`s) by name, and for the rest.
    var durationBuckets: [String: [Duration]] = [:]
    var defaultDurationBuckets: [Duration] = [
        .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
        .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500),
        .seconds(5), .seconds(10),
    ]
    var valueBuckets: [Double] = [1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000]

    /// Creates families in `registry`, with the help `registered`'s factories declare.
    init(registry: PrometheusCollectorRegistry, histograms: DurationHistogramRegistry = DurationHistogramRegistry(), registered: Registry = Registry()) {
        self.registry = registry
        self.histograms = histograms
        declared = registered.metricHelp
    }

    /// The runtime's own family `name` with its help text.
    static func descriptor(_ name: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: name, unitName: "", helpText: MetricCatalog.help(for: name))
    }

    /// The family `name` with its help text.
    func descriptor(_ name: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: name, unitName: "", helpText: declared[name] ?? MetricCatalog.help(for: name))
    }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        registry.makeCounter(descriptor: descriptor(label), labels: dimensions)
    }

    func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        registry.makeCounter(descriptor: descriptor(label), labels: dimensions)
    }

    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        guard aggregate else { return registry.makeGauge(descriptor: descriptor(label), labels: dimensions) }
        return registry.makeValueHistogram(descriptor: descriptor(label), labels: dimensions, buckets: valueBuckets)
    }

    func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        registry.makeGauge(descriptor: descriptor(label), labels: dimensions)
    }

    /// A histogram of ``histograms``, written after the registry's families.
    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        histograms.make(name: label, help: descriptor(label).helpText ?? "", labels: dimensions,
                        buckets: durationBuckets[label] ?? defaultDurationBuckets)
    }

    func destroyCounter(_ handler: any CounterHandler) {
        if let counter = handler as? Prometheus.Counter { registry.unregisterCounter(counter) }
    }

    func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {
        if let counter = handler as? Prometheus.Counter { registry.unregisterCounter(counter) }
    }

    func destroyRecorder(_ handler: any RecorderHandler) {
        if let gauge = handler as? Prometheus.Gauge { registry.unregisterGauge(gauge) }
        if let histogram = handler as? ValueHistogram { registry.unregisterValueHistogram(histogram) }
    }

    func destroyMeter(_ handler: any MeterHandler) {
        if let gauge = handler as? Prometheus.Gauge { registry.unregisterGauge(gauge) }
    }

    func destroyTimer(_ handler: any TimerHandler) {
        if let histogram = handler as? FixedDurationHistogram { histograms.unregister(histogram) }
    }
}
