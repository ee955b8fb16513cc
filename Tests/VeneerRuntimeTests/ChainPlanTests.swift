import Logging
import Metrics
import Testing
import VeneerConfig
import VeneerCore
import VeneerDecorators
import VeneerOrigins
@testable import VeneerRuntime
import VeneerTestSupport

/// ChainBuilder works out once per chain which fast path the whole chain supports.
@Suite("Chain plans")
struct ChainPlanTests {
    /// The plan of a chain (`tag` is a decorator with `handle` alone), as `kind outermost-type`.
    static func plan(origin: String, chain: String) async throws -> String {
        let yaml = "environments: {development: {origin: {\(origin)}, chain: [\(chain)]}}"
        let document = try ConfigDocument(source: ConfigSource(file: "plan.yaml", text: yaml))
        let spec = try document.environment("development", registry: extendedRegistry, variables: [:], workingDirectory: "/")
        let transports = StandardTransportProvider()
        defer { Task { await transports.shutdown() } }
        let context = BuildContext(logger: quietLogger(), clock: ManualClock(), metrics: NOOPMetricsHandler.instance, transports: transports,
                                   stateDirectory: "/tmp/veneer-plan-tests",
                                   stores: StoreRegistry(specs: [:], carried: CarriedState(), health: HealthBoard(), logger: quietLogger(),
                                                          runner: BackgroundRunner(logger: quietLogger())))
        let built = try await ChainBuilder.build(spec, context: context)
        let name = String(describing: type(of: built.plan.handler))
        #expect(String(describing: type(of: built.handler)) == name, "the plan answers through the chain's outermost handler")
        switch built.plan {
        case .immediate: return "immediate \(name)"
        case .callback: return "callback \(name)"
        case .task: return "task \(name)"
        }
    }

    static let http = #"upstream: {url: "http://127.0.0.1:9"}"#
    static let https = #"upstream: {url: "https://127.0.0.1:9"}"#
    static let mock = "mock: {}"

    @Test("immediate with a cache in front, callback for a plain-HTTP upstream; a handler without the capability, https or the mock: a task", arguments: [
        (http, "cache", "immediate CacheDecorator"),
        (mock, "latency_log, cache", "immediate LatencyLogDecorator"),
        (http, "latency_log, cache, latency_log", "immediate LatencyLogDecorator"),
        (https, "latency_log, cache", "immediate LatencyLogDecorator"),
        (http, "", "callback UpstreamOrigin"),
        (http, "latency_log", "callback LatencyLogDecorator"),
        (http, "latency_log, latency_log", "callback LatencyLogDecorator"),
        (http, "{tag: {name: a}}, latency_log", "task TagDecorator"),
        (http, "latency_log, {tag: {name: a}}", "task LatencyLogDecorator"),
        (http, "latency_log, {tag: {name: a}}, cache", "task LatencyLogDecorator"),
        (http, "{tag: {name: a}}, cache", "task TagDecorator"),
        (http, "block_list, cache", "immediate BlockListDecorator"),
        (http, "latency_log, block_list, cache", "immediate LatencyLogDecorator"),
        (http, "latency_log, cache, block_list", "immediate LatencyLogDecorator"),
        (http, "block_list", "task BlockListDecorator"),
        (https, "latency_log", "task LatencyLogDecorator"),
        (https, "", "task UpstreamOrigin"),
        (mock, "latency_log", "task LatencyLogDecorator"),
        (mock, "", "task MockOrigin"),
    ])
    func plans(origin: String, chain: String, expected: String) async throws {
        #expect(try await Self.plan(origin: origin, chain: chain) == expected)
    }
}
