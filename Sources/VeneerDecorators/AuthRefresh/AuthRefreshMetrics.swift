import CoreMetrics
import Foundation
import VeneerConfig

/// What a token manager reports, labelled by its token endpoint's authority: refreshes by
/// the endpoint's answer, when the access token held expires, and whether refreshing has
/// stopped until an operator acts.
struct AuthRefreshMetrics: Sendable {
    private let granted: Counter
    private let rejected: Counter
    private let failed: Counter
    private let unknown: Counter
    private let expiry: Gauge
    private let stopped: Gauge

    /// The families, as `/-/metrics` describes them.
    static let descriptions = [
        MetricDescription("veneer_auth_refresh_refreshes_total",
                          "Refresh requests answered by the token endpoint, by endpoint and result (granted, rejected, failed, unknown)."),
        MetricDescription("veneer_auth_refresh_token_expiry_timestamp_seconds",
                          "When the access token held expires, in seconds since 1970 (0: none held, or no expiry given)."),
        MetricDescription("veneer_auth_refresh_stopped", "1 while refreshing is stopped until an operator acts (token rejected, or outcome unknown), else 0."),
    ]

    init(endpoint: String, factory: any MetricsFactory) {
        func refreshes(_ result: String) -> Counter {
            Counter(label: "veneer_auth_refresh_refreshes_total", dimensions: [("endpoint", endpoint), ("result", result)], factory: factory)
        }
        granted = refreshes("granted")
        rejected = refreshes("rejected")
        failed = refreshes("failed")
        unknown = refreshes("unknown")
        expiry = Gauge(label: "veneer_auth_refresh_token_expiry_timestamp_seconds", dimensions: [("endpoint", endpoint)], factory: factory)
        stopped = Gauge(label: "veneer_auth_refresh_stopped", dimensions: [("endpoint", endpoint)], factory: factory)
    }

    /// Counts the endpoint's answer to one refresh request.
    func answered(_ result: TokenGrantResult) {
        switch result {
        case .granted: granted.increment()
        case .rejected: rejected.increment()
        case .failed: failed.increment()
        case .unknown: unknown.increment()
        }
    }

    /// The manager's state after any change: the access token's expiry (0 when there is none
    /// or it did not say), and 1 while refreshing is stopped.
    func update(_ machine: TokenRefreshStateMachine) {
        expiry.record(machine.access?.expiresAt?.timeIntervalSince1970 ?? 0)
        if case .stopped = machine.state { stopped.record(1) } else { stopped.record(0) }
    }
}
