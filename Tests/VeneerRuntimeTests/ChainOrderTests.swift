import Foundation
import HTTPTypes
import NIOCore
import Testing
import VeneerConfig
import VeneerCore
import VeneerRuntime
import VeneerTestSupport

/// A decorator registered by "library code": it adds its name to `X-Trail` on the way in
/// and on the way out, so a test can read the order in which decorators saw the request.
struct TagDecorator: Handler {
    let name: String
    let inner: any Handler

    func handle(_ request: ProxyRequest) async throws -> ProxyResponse {
        var request = request
        request.headers[.trail] = [request.headers[.trail], name].compactMap { $0 }.joined(separator: ",")
        var response = try await inner.handle(request)
        response.headers[.trail] = [response.headers[.trail], name].compactMap { $0 }.joined(separator: ",")
        return response
    }

    static let factory = DecoratorFactory(
        name: "tag", summary: "adds its name to X-Trail", options: [OptionDoc("name", "text", "the name")],
        decode: { mapping, _ in mapping.string("name", required: true) },
        make: { name, inner, _ in TagDecorator(name: name, inner: inner) })
}

/// An origin that echoes the request trail back.
struct TrailOrigin: Handler {
    func handle(_ request: ProxyRequest) async throws -> ProxyResponse {
        ProxyResponse(status: .ok, headers: [.seenTrail: request.headers[.trail] ?? ""], body: ByteBuffer(string: "{}"))
    }

    static let factory = OriginFactory(name: "trail", summary: "echoes X-Trail", options: [], decode: { _ in true },
                                       make: { _, _ in TrailOrigin() })
}

extension HTTPField.Name {
    static let trail = HTTPField.Name("X-Trail")!
    static let seenTrail = HTTPField.Name("X-Seen-Trail")!
}

let extendedRegistry: Registry = {
    var registry = Registry.standard
    registry.register(TagDecorator.factory)
    registry.register(TrailOrigin.factory)
    return registry
}()

@Suite("Registry and chain assembly")
struct ChainOrderTests {
    @Test("the factories that say they read request bodies whole are those whose handlers do (ReadsRequestBodies): record and mock")
    func readsRequestBodies() {
        #expect(Registry.standard.decorators.values.filter(\.readsRequestBodies).map(\.name) == ["record"])
        #expect(Registry.standard.origins.values.filter(\.readsRequestBodies).map(\.name) == ["mock"])
    }

    @Test("the first chain entry is outermost: it sees the request first and the response last")
    func order() async throws {
        let yaml = """
            environments:
              development:
                origin: { trail: {} }
                chain:
                  - tag: { name: a }
                  - tag: { name: b }
                  - tag: { name: c }
            """
        try await withVeneer(yaml: yaml, registry: extendedRegistry) { (veneer: RunningVeneer) async throws in
            let response = try await veneer.request("GET", "/posts/1")
            #expect(response.header("X-Seen-Trail") == "a,b,c")
            #expect(response.header("X-Trail") == "c,b,a")
        }
    }

    @Test("code linking Veneer registers its own decorators next to the standard ones")
    func extensible() {
        #expect(Registry.standard.decoratorNames.contains("latency_log"))
        #expect(Registry.standard.decorators["tag"] == nil)
        #expect(extendedRegistry.decoratorNames.contains("tag"))
        #expect(extendedRegistry.originNames == ["mock", "replay", "trail", "upstream"])
    }

    @Test("the built-in configuration is a development environment with the mock origin")
    func builtIn() throws {
        let document = try ConfigDocument(source: ConfigSource(file: "<built-in>", text: ConfigLocator.builtInText))
        let spec = try document.environment("development", registry: .standard, variables: [:], workingDirectory: "/")
        #expect(spec.origin.name == "mock")
        #expect(spec.chain.map(\.name).contains("latency_log"))
        #expect(spec.listen.description == "127.0.0.1:8080")
    }

    @Test("which file: --config, then $VENEER_CONFIG, then config/veneer.yaml, then /etc/veneer/veneer.yaml, then built-in")
    func locator() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let explicit = directory + "/explicit.yaml"
        let fromEnvironment = directory + "/env.yaml"
        try "a".write(toFile: explicit, atomically: true, encoding: .utf8)
        try "b".write(toFile: fromEnvironment, atomically: true, encoding: .utf8)
        #expect(try ConfigLocator.source(explicit: explicit, variables: ["VENEER_CONFIG": fromEnvironment]).file == explicit)
        #expect(try ConfigLocator.source(explicit: nil, variables: ["VENEER_CONFIG": fromEnvironment]).file == fromEnvironment)
        #expect(try ConfigLocator.source(explicit: nil, variables: [:], fileExists: { $0 == "/etc/veneer/veneer.yaml" && false }).file == "<built-in>")
        #expect(throws: ConfigError.self) { try ConfigLocator.source(explicit: directory + "/missing.yaml", variables: [:]) }
        #expect(ConfigLocator.environment(explicit: nil, variables: ["VENEER_ENV": "staging"]) == "staging")
        #expect(ConfigLocator.environment(explicit: "production", variables: ["VENEER_ENV": "staging"]) == "production")
        #expect(ConfigLocator.environment(explicit: nil, variables: [:]) == "development")
    }
}
