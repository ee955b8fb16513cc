import CoreMetrics

/// What the pooled upstream transport counts: connections that could not be opened (by
/// reason), requests that waited for a connection (every one was busy and the loop's limit
/// reached), and requests sent again after a reused connection closed without answering.
public struct UpstreamMetrics: Sendable {
    let connectRefused: Counter
    let connectTimedOut: Counter
    let poolWaits: Counter
    let retries: Counter

    /// Counters created through `factory`.
    public init(factory: any MetricsFactory) {
        connectRefused = Counter(label: "veneer_upstream_connect_failures_total", dimensions: [("reason", "unreachable")], factory: factory)
        connectTimedOut = Counter(label: "veneer_upstream_connect_failures_total", dimensions: [("reason", "timeout")], factory: factory)
        poolWaits = Counter(label: "veneer_upstream_pool_waits_total", dimensions: [], factory: factory)
        retries = Counter(label: "veneer_upstream_retries_total", dimensions: [], factory: factory)
    }

    /// Counters that count nowhere (tests, tools).
    public static let none = UpstreamMetrics(factory: NOOPMetricsHandler.instance)
}
