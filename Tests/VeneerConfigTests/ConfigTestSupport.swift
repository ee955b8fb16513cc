import Foundation
import VeneerConfig
import VeneerCore

/// A registry for config tests: the real latency_log-like options shape plus a decorator
/// with a store, a secret and sizes, registered the way library users register theirs.
let testRegistry: Registry = {
    var registry = Registry()
    registry.register(OriginFactory(
        name: "mock", summary: "test mock", options: [OptionDoc("seed", "file", "seed"), OptionDoc("latency", "duration", "delay")],
        readsRequestBodies: true,
        decode: { mapping in
            _ = mapping.filePath("seed")
            return mapping.duration("latency", default: .zero, in: Units.anyDuration)
        },
        make: { _, _ in RecordingOrigin() }))
    registry.register(OriginFactory(
        name: "upstream", summary: "test upstream",
        options: [OptionDoc("url", "URL", "url"), OptionDoc("timeout", "duration", "timeout")],
        decode: { mapping in
            let url = mapping.string("url", required: true)
            _ = mapping.duration("timeout", default: .seconds(10), in: Units.anyDuration)
            return url
        },
        make: { _, _ in RecordingOrigin() }))
    registry.register(DecoratorFactory(
        name: "latency_log", summary: "log",
        options: [OptionDoc("label", "text", "label"), OptionDoc("slow", "duration", "slow")],
        decode: { mapping, site in
            (mapping.string("label", default: String(site.index)) ?? "", mapping.duration("slow", in: Units.anyDuration))
        },
        make: { _, inner, _ in inner }))
    registry.register(DecoratorFactory(
        name: "cache", summary: "cache",
        options: [OptionDoc("ttl", "duration", "ttl"), OptionDoc("store", "store", "store"), OptionDoc("max_bytes", "size", "size"),
                  OptionDoc("max_entries", "integer", "entries")],
        decode: { mapping, _ in
            (mapping.duration("ttl", default: .seconds(60), in: Units.anyDuration), mapping.storeReference(), mapping.size("max_bytes", default: 64 << 20, in: Units.anySize),
             mapping.int("max_entries", default: 10000, in: 1...1_000_000))
        },
        make: { _, inner, _ in inner }))
    registry.register(DecoratorFactory(
        name: "auth_refresh", summary: "auth",
        options: [OptionDoc("token_url", "URL", "url"), OptionDoc("client_secret", "secret", "secret", secret: true)],
        decode: { mapping, _ in (mapping.string("token_url", required: true), mapping.secret("client_secret", required: true)) },
        make: { _, inner, _ in inner }))
    return registry
}()

struct RecordingOrigin: Handler {
    func handle(_ request: ProxyRequest) async throws -> ProxyResponse { ProxyResponse(status: .ok) }
}

/// Decodes `yaml` and returns the problems as `file:line:column: path: message` lines.
func problems(_ yaml: String, environment: String = "development", variables: [String: String] = [:]) -> [String] {
    do {
        let document = try ConfigDocument(source: ConfigSource(file: "veneer.yaml", text: yaml))
        _ = try document.environment(environment, registry: testRegistry, variables: variables, workingDirectory: "/srv")
        return []
    } catch {
        return error.diagnostics.map(\.description)
    }
}

/// Decodes `yaml` and returns the environment (the test fails on any problem).
func decode(_ yaml: String, environment: String = "development", variables: [String: String] = [:]) throws -> EnvironmentSpec {
    let document = try ConfigDocument(source: ConfigSource(file: "veneer.yaml", text: yaml))
    return try document.environment(environment, registry: testRegistry, variables: variables, workingDirectory: "/srv")
}
