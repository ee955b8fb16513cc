import Foundation
import VeneerCore

/// An environment's `telemetry:` with the standard OpenTelemetry variables filled in: where
/// the spans of its sampled requests go (OTLP/HTTP, protobuf), which are sampled, and how many
/// may wait. Off (nil in ``EnvironmentSpec/telemetry``) unless `telemetry:` names an endpoint
/// or `OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`) is set; `telemetry: off` and
/// `OTEL_SDK_DISABLED=true` turn it off.
public struct TelemetrySpec: Sendable, Hashable {
    /// The URL spans are posted to (`.../v1/traces`).
    public var endpoint: Endpoint
    /// Request headers for the collector (an API key): from `headers_file` (one `Name: value`
    /// a line, a secret file) and `OTEL_EXPORTER_OTLP_HEADERS` (`name=value,...`).
    public var headersFile: String?
    /// Headers from `OTEL_EXPORTER_OTLP_HEADERS` (or `..._TRACES_HEADERS`).
    public var variableHeaders: [String: String] = [:]
    /// The `service.name` of the spans.
    public var serviceName: String = "veneer"
    /// Which traces are recorded.
    public var sampler = TraceSampler(ratio: 1)
    /// How many spans may wait for the collector; more are dropped and counted.
    public var queue = 2048
    /// How long one export may take before it is given up (its spans dropped and counted).
    public var timeout: Duration = .seconds(5)

    /// The bounds of `queue` (README, Bounds of numbers).
    public static let queueBounds = 64...65536
    /// The bounds of `timeout`.
    public static let timeoutBounds = Bounded<Durations>(.milliseconds(1) ... .seconds(60))

    /// A spec.
    public init(endpoint: Endpoint) {
        self.endpoint = endpoint
    }

    /// What `veneer chain --json` shows (headers never).
    public var summary: JSONValue {
        .object([
            ("endpoint", .string(endpoint.description)), ("service_name", .string(serviceName)),
            ("sample", .number(String(sampler.ratio))), ("parent_based", .bool(sampler.parentBased)), ("queue", .int(queue)),
            ("timeout", .string(Units.format(timeout))), ("headers_file", headersFile.map(JSONValue.string) ?? .null),
        ])
    }

    /// `name=value,name2=value2` (the OpenTelemetry variables' format, values percent-encoded); nil when malformed.
    public static func parseHeaderList(_ text: String) -> [String: String]? {
        var headers: [String: String] = [:]
        for item in text.split(separator: ",") {
            guard let equals = item.firstIndex(of: "=") else { return nil }
            let name = item[..<equals].trimmingCharacters(in: .whitespaces)
            let value = item[item.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            guard !name.isEmpty, let decoded = value.removingPercentEncoding else { return nil }
            headers[name] = decoded
        }
        return headers
    }

    /// The headers of a `headers_file`: one `Name: value` a line; empty lines and `#` comments skipped.
    public static func parseHeaderFile(_ text: String) -> (headers: [String: String], problem: String?) {
        var headers: [String: String] = [:]
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            guard let colon = trimmed.firstIndex(of: ":"), colon != trimmed.startIndex else {
                return ([:], "line \(index + 1) is not 'Name: value'")
            }
            headers[String(trimmed[..<colon])] = trimmed[trimmed.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return (headers, nil)
    }
}

extension ConfigDocument {
    /// `telemetry:` and the OpenTelemetry variables (see ``TelemetrySpec``).
    func decodeTelemetry(_ value: ConfigValue?, context: DecodingContext) -> TelemetrySpec? {
        let variables = context.variables
        if variables["OTEL_SDK_DISABLED"]?.lowercased() == "true" { return nil }
        if let value, case .scalar = value.node {
            // `telemetry: off`; anything else scalar is an error.
            if value.string() != "off" { value.error("expected a mapping (endpoint, headers_file, sample, service_name, queue, timeout) or off") }
            return nil
        }
        let mapping = value?.mapping(allowedKeys: ["endpoint", "headers_file", "sample", "service_name", "queue", "timeout"])
        // The variable's endpoint is a base URL (`/v1/traces` appended); the traces one is whole.
        let variableEndpoint = variables["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"].flatMap { $0.isEmpty ? nil : $0 }
            ?? variables["OTEL_EXPORTER_OTLP_ENDPOINT"].flatMap { $0.isEmpty ? nil : ($0.hasSuffix("/") ? $0 : $0 + "/") + "v1/traces" }
        let endpointText = mapping?.string("endpoint") ?? variableEndpoint
        guard let endpointText else {
            if mapping != nil { mapping?.error("endpoint", "required (or OTEL_EXPORTER_OTLP_ENDPOINT)") }
            return nil
        }
        guard let endpoint = Endpoint(url: endpointText), endpoint.scheme == "http" || endpoint.scheme == "https" else {
            let message = "\(quoted(endpointText)) is not an http:// or https:// URL"
            if let mapping, mapping["endpoint"] != nil { mapping.error("endpoint", message) } else {
                context.sink.error(nil, "OTEL_EXPORTER_OTLP_ENDPOINT", message)
            }
            return nil
        }
        var spec = TelemetrySpec(endpoint: endpoint)
        if let headers = variables["OTEL_EXPORTER_OTLP_TRACES_HEADERS"] ?? variables["OTEL_EXPORTER_OTLP_HEADERS"], !headers.isEmpty {
            if let parsed = TelemetrySpec.parseHeaderList(headers) { spec.variableHeaders = parsed } else {
                context.sink.error(nil, "OTEL_EXPORTER_OTLP_HEADERS", "is not a list of name=value pairs separated by commas")
            }
        }
        if let path = mapping?.filePath("headers_file") {
            spec.headersFile = path
            if let data = FileManager.default.contents(atPath: path) {
                if let problem = TelemetrySpec.parseHeaderFile(String(decoding: data, as: UTF8.self)).problem {
                    mapping?.error("headers_file", "\(path): \(problem)")
                }
            } else {
                mapping?.error("headers_file", "\(path) cannot be read")
            }
        }
        spec.serviceName = mapping?.string("service_name") ?? variables["OTEL_SERVICE_NAME"].flatMap { $0.isEmpty ? nil : $0 } ?? "veneer"
        spec.sampler = decodeSampler(mapping, variables: variables, context: context)
        spec.queue = mapping?.int("queue", default: spec.queue, in: TelemetrySpec.queueBounds) ?? spec.queue
        spec.timeout = mapping?.duration("timeout", default: spec.timeout, in: TelemetrySpec.timeoutBounds) ?? spec.timeout
        return spec
    }

    /// `sample` (a fraction, 0 to 1, parent-based) or `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG`.
    private func decodeSampler(_ mapping: ConfigMapping?, variables: [String: String], context: DecodingContext) -> TraceSampler {
        if let value = mapping?["sample"], let text = value.string() {
            guard let ratio = Self.fraction(text) else {
                value.error("\(quoted(text)) is not a fraction from 0 to 1 (e.g. 0.1)")
                return TraceSampler(ratio: 1)
            }
            mapping?.note("sample", .number(String(ratio)))
            return TraceSampler(ratio: ratio)
        }
        let argument = variables["OTEL_TRACES_SAMPLER_ARG"].flatMap { $0.isEmpty ? nil : $0 }
        var ratio = 1.0
        if let argument {
            if let parsed = Self.fraction(argument) { ratio = parsed } else {
                context.sink.error(nil, "OTEL_TRACES_SAMPLER_ARG", "\(quoted(argument)) is not a fraction from 0 to 1")
            }
        }
        switch variables["OTEL_TRACES_SAMPLER"] ?? "" {
        case "", "parentbased_always_on": return TraceSampler(ratio: 1)
        case "always_on": return TraceSampler(ratio: 1, parentBased: false)
        case "always_off": return TraceSampler(ratio: 0, parentBased: false)
        case "parentbased_always_off": return TraceSampler(ratio: 0)
        case "traceidratio": return TraceSampler(ratio: argument == nil ? 1 : ratio, parentBased: false)
        case "parentbased_traceidratio": return TraceSampler(ratio: argument == nil ? 1 : ratio)
        case let other:
            context.sink.error(nil, "OTEL_TRACES_SAMPLER", "\(quoted(other)) is not one of always_on, always_off, traceidratio, "
                               + "parentbased_always_on, parentbased_always_off, parentbased_traceidratio")
            return TraceSampler(ratio: 1)
        }
    }

    /// A decimal fraction from 0 to 1 (`0.1`, `1`), without exponent or sign.
    static func fraction(_ text: String) -> Double? {
        guard !text.isEmpty, text.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }), let value = Double(text), (0...1).contains(value)
        else { return nil }
        return value
    }
}
