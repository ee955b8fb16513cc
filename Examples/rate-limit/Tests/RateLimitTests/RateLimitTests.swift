import Foundation
import RateLimit
import Synchronization
import Testing
import VeneerConfig
import VeneerCore
import VeneerRuntime

/// `rate_limit` as Veneer runs it: registered next to the standard decorators, decoded from
/// YAML, built by the runtime's chain builder in a running instance, asked through the chain
/// and through its admin route, its figures read as the status page reads them. Only Veneer's
/// public API: what any decorator written outside Veneer has.
@Suite("rate_limit, a decorator written outside Veneer")
struct RateLimitTests {
    /// The standard decorators and origins, and `rate_limit`: the one line a program adds.
    static let registry: Registry = {
        var registry = Registry.standard
        registry.register(RateLimitDecorator.factory)
        return registry
    }()

    /// A test stops its instance by cancelling it, which the runtime's log would report.
    static let quiet: Logger = {
        var logger = Logger(label: "veneer.test")
        logger.logLevel = .critical
        return logger
    }()

    /// Time that moves only when a test says so.
    final class StepClock: VeneerClock {
        private let elapsed = Mutex(Duration.zero)
        func now() -> Date { Date(timeIntervalSince1970: 1_800_000_000) + TimeInterval(elapsed.withLock { $0 }.components.seconds) }
        func monotonic() -> Duration { elapsed.withLock { $0 } }
        func sleep(for duration: Duration) async throws { try await Task.sleep(for: duration) }
        func advance(by duration: Duration) { elapsed.withLock { $0 += duration } }
    }

    /// A text a test changes while an instance reads it.
    final class Text: Sendable {
        private let text: Mutex<String>
        init(_ text: String) { self.text = Mutex(text) }
        var value: String {
            get { text.withLock { $0 } }
            set { text.withLock { $0 = newValue } }
        }
    }

    static func yaml(_ options: String) -> String {
        """
        environments:
          development:
            listen: 127.0.0.1:0
            origin: { mock: {} }
            chain:
              - rate_limit: \(options)
        """
    }

    /// Runs an instance of the configuration `yaml` gives (at start and at each reload) until `body` ends.
    func withInstance(_ yaml: @escaping @Sendable () -> String, clock: StepClock,
                      _ body: (VeneerInstance, ActiveChain) async throws -> Void) async throws {
        let configuration = InstanceConfiguration(
            readSource: { () throws(ConfigError) -> ConfigSource in ConfigSource(file: "test.yaml", text: yaml()) },
            environment: "development", variables: [:], registry: Self.registry, clock: clock, logger: Self.quiet)
        let ready = AsyncStream<ActiveChain>.makeStream()
        let instance = try await VeneerInstance(configuration: configuration) { ready.continuation.yield($0.chain) }
        // A service group would stop it gracefully on SIGTERM; a test cancels it.
        let running = Task { try await instance.run() }
        defer { running.cancel() }
        var chains = ready.stream.makeAsyncIterator()
        let chain = try #require(await chains.next())
        try await body(instance, chain)
    }

    /// `GET /posts` from `client`, through the chain serving.
    func get(_ chain: ActiveChain, client: String = "192.0.2.1", headers: HTTPFields = [:]) async throws -> ProxyResponse {
        try await chain.generation.handler.handle(ProxyRequest(method: .get, route: .list(.posts), headers: headers, client: ClientAddress(client)))
    }

    /// What the status page shows of the chain's first entry.
    func figures(_ chain: ActiveChain) async throws -> [String: JSONValue] {
        let reporting = try #require(chain.generation.entries.first?.handler as? any StatusReporting)
        return Dictionary(uniqueKeysWithValues: await reporting.statusFigures().map { ($0.name, $0.value) })
    }

    @Test("bad options are refused with their line and column, all at once")
    func options() throws {
        do {
            _ = try ConfigDocument(source: ConfigSource(file: "test.yaml", text: Self.yaml("{ per: 0s, key: nobody }"))).environment(
                "development", registry: Self.registry, variables: [:], workingDirectory: "/tmp")
            Issue.record("options without requests were accepted")
        } catch {
            #expect(error.diagnostics.map(\.description) == [
                "test.yaml:6:21: environments.development.chain[0].rate_limit.requests: required",
            ], "without requests nothing else is decoded")
        }
        do {
            _ = try ConfigDocument(source: ConfigSource(file: "test.yaml", text: Self.yaml("{ requests: 5, per: 0s, key: nobody }")))
                .environment("development", registry: Self.registry, variables: [:], workingDirectory: "/tmp")
            Issue.record("bad options were accepted")
        } catch {
            #expect(error.diagnostics.map(\.description) == [
                "test.yaml:6:41: environments.development.chain[0].rate_limit.per: 0s is out of range (1ms...1d)",
                #"test.yaml:6:50: environments.development.chain[0].rate_limit.key: "nobody" is not client, global or header:NAME"#,
            ])
        }
    }

    @Test("a client gets its burst at once, then the rate; the rest get 429 with Retry-After and never reach the origin; others have their own budget")
    func limits() async throws {
        let clock = StepClock()
        try await withInstance({ Self.yaml("{ requests: 1, per: 10s, burst: 2 }") }, clock: clock) { _, chain in
            #expect(try await get(chain).status == .ok)
            #expect(try await get(chain).status == .ok)
            let refused = try await get(chain)
            #expect(refused.status == .tooManyRequests && refused.headers[.retryAfter] == "10")
            #expect(String(buffer: refused.body).contains(#""error":"too_many_requests""#))
            #expect(try await get(chain, client: "192.0.2.2").status == .ok, "another client has its own budget")
            clock.advance(by: .seconds(10))
            #expect(try await get(chain).status == .ok, "one more request after one period")
            #expect(try await get(chain).status == .tooManyRequests)
            let figures = try await figures(chain)
            #expect(figures["allowed"] == .int(4) && figures["limited"] == .int(2) && figures["budgets"] == .int(2))
        }
    }

    @Test("its admin route lists the budgets and gives a caller its burst back")
    func admin() async throws {
        try await withInstance({ Self.yaml("{ requests: 1, per: 1h, key: 'header:X-Api-Key' }") }, clock: StepClock()) { _, chain in
            let key: HTTPFields = [HTTPField.Name("X-Api-Key")!: "team-a"]
            #expect(try await get(chain, headers: key).status == .ok)
            #expect(try await get(chain, headers: key).status == .tooManyRequests)
            #expect(try await get(chain, client: "192.0.2.9", headers: key).status == .tooManyRequests, "the key, not the client")

            let route = try #require(chain.generation.adminRoutes.route("rate_limit"))
            let listed = await route(AdminRequest(method: .get, rest: ""))
            #expect(try JSONValue.parse(listed.body) == .array([.object([("key", .string("team-a")), ("requests_left", .int(0))])]))
            let reset = await route(AdminRequest(method: .delete, rest: "", query: "key=team-a"))
            #expect(reset.status == .ok)
            #expect(try JSONValue.parse(reset.body)["reset"] == .int(1))
            #expect(try await get(chain, headers: key).status == .ok)
            #expect(chain.generation.adminRoutes.endpoints.map(\.path) == ["/-/rate_limit"], "GET /-/ lists it")
        }
    }

    @Test("a reload keeps the budgets of an unchanged entry; changed options start afresh")
    func reload() async throws {
        let text = Text(Self.yaml("{ requests: 1, per: 1h }"))
        try await withInstance({ text.value }, clock: StepClock()) { (instance: VeneerInstance, chain: ActiveChain) async throws -> Void in
            #expect(try await get(chain).status == .ok)
            #expect(try await get(chain).status == .tooManyRequests)
            #expect((try? await instance.reload().get())?.number == 2)
            #expect(try await get(chain).status == .tooManyRequests, "still spent after a reload")
            text.value = Self.yaml("{ requests: 2, per: 1h }")
            #expect((try? await instance.reload().get())?.number == 3)
            #expect(try await get(chain).status == .ok, "other options: a new budget")
        }
    }
}
