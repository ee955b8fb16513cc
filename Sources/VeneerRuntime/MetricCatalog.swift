/// The metric families of the runtime, the edge and the HTTP clients, with their `# HELP`
/// text; the decorators and origins declare their own (``DecoratorFactory/metrics``). A
/// family created under another name still gets a help line (``help(for:)``), so that the
/// exposition always passes `promtool check metrics`.
enum MetricCatalog {
    static let help: [String: String] = [
        // The edge: every request the listeners answered, refusals included.
        "veneer_http_requests_total": "Requests answered by the listeners, Veneer's own refusals included, by route template, method and status.",
        "veneer_http_requests_in_flight": "Requests read whole and not yet answered.",
        "veneer_http_requests_by_unit_total": "Requests answered to callers the kernel named (Unix sockets, peer_identity), by their systemd unit (at most 32, then other; none without one).",
        "veneer_access_log_dropped_lines_total": "Access log lines dropped because the writer fell behind.",
        // Telemetry (OTLP span export).
        "veneer_telemetry_spans_exported_total": "Spans of sampled requests the telemetry collector took.",
        "veneer_telemetry_spans_dropped_total": "Spans of sampled requests dropped: the queue was full, or the collector failed or was too slow (reason).",
        // The HTTP clients' pooled http:// transport.
        "veneer_upstream_connect_failures_total": "Upstream connections that could not be opened, by reason (pooled http:// transport).",
        "veneer_upstream_pool_waits_total": "Upstream requests that waited for a connection of the pool (pooled http:// transport).",
        "veneer_upstream_retries_total": "Upstream requests sent again after a reused connection closed without an answer (pooled http:// transport).",
        // The process.
        "veneer_buffered_bytes": "Bytes held whole in memory now across every connection, within limits.buffered (request bodies, answers read whole, cache and record copies).",
        "veneer_buffered_peak_bytes": "The most bytes held whole in memory at once since the start (never over limits.buffered as it was then).",
        "veneer_buffered_limit_bytes": "limits.buffered of the environment serving.",
        "veneer_buffered_waiters": "Buffering that waits for room in limits.buffered now (at most limits.buffered_waiters).",
        "veneer_build_info": "Always 1; the version of the running binary is a label.",
        "veneer_environment_info": "Always 1; the environment serving is a label (a switch replaces the series).",
        "veneer_config_last_reload_successful": "Whether the last configuration reload (or the first load) succeeded (1) or failed (0).",
        "veneer_config_last_reload_success_timestamp_seconds": "When the configuration was last loaded successfully, in seconds since 1970.",
    ]

    /// The help text of the family `name`.
    static func help(for name: String) -> String {
        help[name] ?? "Veneer metric \(name)."
    }
}
