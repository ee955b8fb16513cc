import CoreMetrics
import VeneerConfig
import VeneerCore

extension LatencyLogDecorator {
    /// The `latency_log` entry of the registry.
    public static let factory = DecoratorFactory(
        name: "latency_log",
        summary: "times everything inside it; one JSON line per request, a histogram, a slow flag",
        options: LatencyLogOptions.docs,
        metrics: [MetricDescription("veneer_request_duration_seconds", "Time spent inside a latency_log decorator, by label, method, route and status."),
                  MetricDescription("veneer_latency_log_dropped_lines_total", "latency_log file lines dropped because the writer fell behind.")],
        decode: LatencyLogOptions.decode,
        make: { options, inner, context in
            let sink: any LogLineSink
            if let path = options.file {
                // One file object per path, shared by every latency_log writing there and
                // reopened at each (re)build: that is what makes SIGHUP log rotation work.
                let file = try context.carried.value(for: .shared("latency_log.file", path)) {
                    try AppendingFileSink(path: path, dropped: Counter(label: "veneer_latency_log_dropped_lines_total", factory: context.metrics),
                                          logger: context.logger)
                }
                try file.reopen()
                sink = file
            } else {
                sink = StandardOutputSink.shared
            }
            return LatencyLogDecorator(inner: inner, options: options, sink: sink, clock: context.clock, metrics: context.metrics)
        }
    )
}
