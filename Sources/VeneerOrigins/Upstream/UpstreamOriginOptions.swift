import CoreMetrics
import VeneerConfig
import VeneerCore

/// Options of the `upstream` origin, decoded once.
public struct UpstreamOriginOptions: Sendable {
    /// Where requests go (scheme, host, port, path prefix).
    public var endpoint: Endpoint
    /// How long a whole exchange may take (504 beyond).
    public var timeout: Duration
    /// Connection settings, shared by every origin with the same ones.
    public var transport: TransportOptions

    /// Creates options.
    public init(endpoint: Endpoint, timeout: Duration = .seconds(10), transport: TransportOptions = TransportOptions()) {
        self.endpoint = endpoint
        self.timeout = timeout
        self.transport = transport
    }

    static let docs: [OptionDoc] = [
        OptionDoc("url", "URL", "the upstream API: http(s)://host[:port][/prefix] (required)"),
        OptionDoc("timeout", "duration", default: "10s", "how long a request may take before 504 upstream_timeout (a streamed upload: from its end)"),
        OptionDoc("connect_timeout", "duration", default: "2s", "how long connecting may take"),
        OptionDoc("connections", "integer", default: "auto", "connection pool size per event loop"),
    ]

    static func decode(_ mapping: ConfigMapping) -> UpstreamOriginOptions? {
        let urlValue = mapping.required("url")
        let url = mapping.string("url")
        let timeout = mapping.duration("timeout", default: .seconds(10), in: .init(.milliseconds(1) ... .seconds(3600))) ?? .seconds(10)
        let connectTimeout = mapping.duration("connect_timeout", default: .seconds(2), in: .init(.milliseconds(1) ... .seconds(600))) ?? .seconds(2)
        var connections: Int?
        if mapping["connections"]?.scalarText() == "auto" {
            mapping.note("connections", .string("auto"))
        } else {
            connections = mapping.int("connections", in: 1...4096)
            if connections == nil { mapping.note("connections", .string("auto")) }
        }
        guard let url else { return nil }
        guard let endpoint = Endpoint(url: url) else {
            urlValue?.error("\"\(url)\" is not an upstream URL (use http(s)://host[:port][/prefix], without query or credentials)")
            return nil
        }
        return UpstreamOriginOptions(endpoint: endpoint, timeout: timeout,
                                     transport: TransportOptions(connectTimeout: connectTimeout, connectionsPerLoop: connections))
    }
}

extension UpstreamOrigin {
    /// The `upstream` entry of the registry.
    public static let factory = OriginFactory(
        name: "upstream",
        summary: "forwards to the real API over HTTP(S) with a shared connection pool",
        options: UpstreamOriginOptions.docs,
        metrics: [MetricDescription("veneer_upstream_request_duration_seconds", "Time the upstream origin took to answer, retries included.")],
        decode: UpstreamOriginOptions.decode,
        make: { options, context in
            var origin = UpstreamOrigin(options: options, transport: context.transports.transport(options.transport),
                           maxResponseBodySize: context.limits.responseBody, streamThreshold: UpstreamOrigin.streamThreshold,
                           bodyTimeout: context.limits.bodyTimeout, clock: context.clock,
                           durations: CoreMetrics.Timer(label: "veneer_upstream_request_duration_seconds", factory: context.metrics),
                           directives: context.requestDirectives)
            origin.buffers = context.buffers
            return origin
        }
    )
}
