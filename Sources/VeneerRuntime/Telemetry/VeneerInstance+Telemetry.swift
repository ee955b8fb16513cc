import CoreMetrics
import Foundation
import Logging
import ServiceLifecycle
import VeneerConfig
import VeneerCore
import VeneerOrigins

extension VeneerInstance {
    /// The exporter of `spec` (nil: telemetry is off), its headers read now: an unreadable
    /// `headers_file` stops the start as a configuration error.
    static func makeExporter(_ spec: TelemetrySpec?, transports: StandardTransportProvider, factory: any MetricsFactory,
                             logger: Logger) throws(ConfigError) -> OTLPExporter? {
        guard let spec else { return nil }
        var headers = spec.variableHeaders
        if let path = spec.headersFile {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ConfigError([ConfigDiagnostic(mark: nil, path: "telemetry.headers_file", message: "\(path) cannot be read")])
            }
            let read = TelemetrySpec.parseHeaderFile(String(decoding: data, as: UTF8.self))
            if let problem = read.problem {
                throw ConfigError([ConfigDiagnostic(mark: nil, path: "telemetry.headers_file", message: "\(path): \(problem)")])
            }
            headers.merge(read.headers) { _, file in file }
        }
        // A transport of its own (one connection per loop): the collector never takes a
        // connection of an upstream's pool.
        let transport = transports.transport(TransportOptions(connectTimeout: .seconds(2), connectionsPerLoop: 1))
        logger.info("telemetry: spans go to the collector", metadata: [
            "endpoint": .string(spec.endpoint.description), "sample": .stringConvertible(spec.sampler.ratio),
            "service_name": .string(spec.serviceName),
        ])
        return OTLPExporter(spec: spec, headers: headers, transport: transport, factory: factory, logger: logger)
    }
}

/// Runs the span exporter, if there is one; at shutdown (after the listeners have drained)
/// it sends what is queued once, before the HTTP clients close.
struct TelemetryService: Service, CustomStringConvertible {
    let exporter: OTLPExporter?
    var description: String { exporter?.description ?? "telemetry (off)" }

    func run() async {
        guard let exporter else {
            // Nothing to do; wait for shutdown like any other service.
            try? await gracefulShutdown()
            return
        }
        await exporter.run()
    }
}
