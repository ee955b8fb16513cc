import Foundation
import Testing
import VeneerConfig
import VeneerCore

@Suite("telemetry: the environment's keys and the OpenTelemetry variables")
struct TelemetryConfigTests {
    static let mock = "environments:\n  development:\n    origin: { mock: {} }\n"

    @Test("off by default; on with an endpoint, with its documented defaults")
    func defaults() throws {
        #expect(try decode(Self.mock).telemetry == nil)
        let spec = try #require(try decode(Self.mock + "    telemetry: { endpoint: \"http://127.0.0.1:4318/v1/traces\" }").telemetry)
        #expect(spec.endpoint.description == "http://127.0.0.1:4318/v1/traces")
        #expect(spec.serviceName == "veneer" && spec.sampler == TraceSampler(ratio: 1) && spec.queue == 2048 && spec.timeout == .seconds(5))
        let tuned = try #require(try decode(Self.mock + "    telemetry: { endpoint: \"http://c:4318/v1/traces\", sample: 0.1, service_name: api, queue: 64 }").telemetry)
        #expect(tuned.sampler == TraceSampler(ratio: 0.1) && tuned.serviceName == "api" && tuned.queue == 64)
    }

    @Test("the standard variables turn it on and fill in what the file does not say; the file wins; off and OTEL_SDK_DISABLED turn it off")
    func variables() throws {
        let variables = ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SERVICE_NAME": "from-env",
                         "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25",
                         "OTEL_EXPORTER_OTLP_HEADERS": "api-key=s%20ecret,x-team=web"]
        let spec = try #require(try decode(Self.mock, variables: variables).telemetry)
        #expect(spec.endpoint.description == "http://collector:4318/v1/traces")
        #expect(spec.serviceName == "from-env" && spec.sampler == TraceSampler(ratio: 0.25))
        #expect(spec.variableHeaders == ["api-key": "s ecret", "x-team": "web"])
        let file = try #require(try decode(Self.mock + "    telemetry: { sample: 1, service_name: file }", variables: variables).telemetry)
        #expect(file.serviceName == "file" && file.sampler == TraceSampler(ratio: 1))
        #expect(try decode(Self.mock + "    telemetry: off", variables: variables).telemetry == nil)
        #expect(try decode(Self.mock, variables: variables.merging(["OTEL_SDK_DISABLED": "true"]) { $1 }).telemetry == nil)
        #expect(try decode(Self.mock, variables: ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:1/traces", "OTEL_TRACES_SAMPLER": "always_off"])
            .telemetry?.sampler == TraceSampler(ratio: 0, parentBased: false))
    }

    @Test("veneer check reports a bad endpoint, sample, header file or variable")
    func refusals() throws {
        let directory = try temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "not a header line\n".write(toFile: directory + "/headers", atomically: true, encoding: .utf8)
        #expect(problems(Self.mock + "    telemetry: { endpoint: \"ftp://x/\" }").contains { $0.contains("telemetry.endpoint") && $0.contains("not an http") })
        #expect(problems(Self.mock + "    telemetry: { sample: 1.5, endpoint: \"http://c:1/v1/traces\" }").contains { $0.contains("telemetry.sample") })
        #expect(problems(Self.mock + "    telemetry: { sample: 1e-1, endpoint: \"http://c:1/v1/traces\" }").contains { $0.contains("telemetry.sample") })
        #expect(problems(Self.mock + "    telemetry: { sample: 0.5 }").contains { $0.contains("telemetry.endpoint") && $0.contains("required") })
        #expect(problems(Self.mock + "    telemetry: { endpoint: \"http://c:1/v1/traces\", headers_file: \(directory)/headers }")
            .contains { $0.contains("telemetry.headers_file") && $0.contains("line 1") })
        #expect(problems(Self.mock + "    telemetry: { endpoint: \"http://c:1/v1/traces\", headers_file: \(directory)/none }")
            .contains { $0.contains("cannot be read") })
        #expect(problems(Self.mock + "    telemetry: { endpoint: \"http://c:1/v1/traces\", colour: blue }").contains { $0.contains("colour") })
        #expect(problems(Self.mock, variables: ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:1", "OTEL_TRACES_SAMPLER": "sometimes"])
            .contains { $0.contains("OTEL_TRACES_SAMPLER") })
        #expect(problems(Self.mock, variables: ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:1", "OTEL_EXPORTER_OTLP_HEADERS": "novalue"])
            .contains { $0.contains("OTEL_EXPORTER_OTLP_HEADERS") })
    }

    func temporaryFolder() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("veneer-telemetry-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }
}
