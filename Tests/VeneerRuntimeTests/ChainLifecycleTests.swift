import Logging
import Metrics
import Synchronization
import Testing
import VeneerConfig
import VeneerCore
import VeneerOrigins
import VeneerServer
@testable import VeneerRuntime
import VeneerTestSupport

/// The life of chains without a socket: build, adopt, release, and the background work that
/// holds a generation, event by event.
@Suite("Chain lifecycle", .timeLimit(.minutes(1)))
struct ChainLifecycleTests {
    /// What the test decorators did, in order.
    final class Events: Sendable {
        private let list = Mutex<[String]>([])
        let closed = Signals<String>()
        func note(_ event: String) { list.withLock { $0.append(event) } }
        var all: [String] { list.withLock { $0 } }
    }

    /// Where the test finds the background work the last chain built was given.
    final class WorkBox: Sendable {
        let work = Mutex<(any BackgroundWork)?>(nil)
    }

    /// A carried object that says when it is closed.
    final class Probe: CarriedResource {
        let name: String
        let events: Events
        init(name: String, events: Events) {
            self.name = name
            self.events = events
        }
        func close() async {
            events.note("closed \(name)")
            events.closed.send(name)
        }
    }

    /// `probe: {name: N}` holds a ``Probe`` shared by name, notes its commit, and hands its
    /// background work to the test; `broken` never builds.
    static func registry(_ events: Events, work: WorkBox = WorkBox()) -> Registry {
        var registry = Registry.standard
        registry.register(DecoratorFactory(
            name: "probe", summary: "holds a probe", options: [OptionDoc("name", "text", "its name")],
            decode: { mapping, _ in mapping.string("name", required: true) },
            make: { (name: String, inner: any Handler, context: BuildContext) in
                _ = context.carried.value(for: .shared("probe", name)) { Probe(name: name, events: events) }
                context.carried.whenCommitted { events.note("committed \(name)") }
                work.work.withLock { $0 = context.backgroundWork }
                return inner
            }))
        registry.register(DecoratorFactory(
            name: "broken", summary: "fails to build", options: [], decode: { _, _ in true },
            make: { (_: Bool, _: any Handler, _: BuildContext) in throw ProxyError.badRequest("broken on purpose") }))
        return registry
    }

    /// A lifecycle over `registry`, with its background runner running while `body` runs.
    static func withLifecycle(_ registry: Registry, _ body: (ChainLifecycle, (String) throws -> EnvironmentSpec) async throws -> Void) async throws {
        let logger = quietLogger()
        let background = BackgroundRunner(logger: logger)
        let stores = BackgroundRunner(logger: logger)
        let lifecycle = ChainLifecycle(makeContext: { spec, carried in
            BuildContext(logger: logger, clock: ManualClock(), metrics: NOOPMetricsHandler.instance, transports: StandardTransportProvider(),
                         stateDirectory: "/tmp/veneer-lifecycle-tests", carried: carried)
        }, clock: ManualClock(), background: background, storeRunner: stores, logger: logger)
        let spec = { (chain: String) throws -> EnvironmentSpec in
            try ConfigDocument(source: ConfigSource(file: "t.yaml", text: "environments: {development: {origin: {mock: {}}, chain: [\(chain)]}}"))
                .environment("development", registry: registry, variables: [:], workingDirectory: "/tmp")
        }
        let running = Task { try await background.run() }
        defer { running.cancel() }
        try await body(lifecycle, spec)
    }

    @Test("a built chain serves nothing until adopted; the first adopted is generation 1, and only then do its deferred changes happen")
    func first() async throws {
        let events = Events()
        try await Self.withLifecycle(Self.registry(events)) { lifecycle, spec in
            let built = try await lifecycle.build(spec("{probe: {name: a}}"))
            #expect(built.number == 1 && lifecycle.chain == nil && events.all.isEmpty)
            let (active, replaced) = await lifecycle.adopt(built)
            #expect(replaced == nil && active.generation === built && lifecycle.serving === built)
            #expect(events.all == ["committed a"])
        }
    }

    @Test("a build that fails releases what it opened afresh, shares nothing of its changes, and the chain serving stays")
    func failedBuild() async throws {
        let events = Events()
        try await Self.withLifecycle(Self.registry(events)) { lifecycle, spec in
            let first = try await lifecycle.build(spec("{probe: {name: a}}"))
            await lifecycle.adopt(first)
            await #expect(throws: ConfigError.self) { try await lifecycle.build(spec("{probe: {name: a}}, {probe: {name: b}}, broken")) }
            #expect(events.all == ["committed a", "closed b"], "b was made for the failed build alone; a is the serving chain's")
            #expect(lifecycle.serving === first)
            #expect(try await lifecycle.build(spec("{probe: {name: a}}")).number == 2, "the next build still follows generation 1")
        }
    }

    @Test("adopting the next retires the old generation; what the new chain no longer holds is closed once the old one's last lease ends")
    func next() async throws {
        let events = Events()
        try await Self.withLifecycle(Self.registry(events)) { lifecycle, spec in
            let (active, _) = await lifecycle.adopt(try await lifecycle.build(spec("{probe: {name: a}}, {probe: {name: b}}")))
            let lease = active.lease()
            let second = try await lifecycle.build(spec("{probe: {name: a}}"))
            let (_, replaced) = await lifecycle.adopt(second)
            let old = try #require(replaced)
            #expect(old.number == 1 && active.generation === second && !old.serving.isDrained)
            #expect(!events.all.contains("closed b"), "a request is still inside the old chain")
            lease.end()
            #expect(await events.closed.next() == "b")
            #expect(old.serving.isDrained && !events.all.contains("closed a"))
        }
    }

    @Test("background work a handler started holds its generation: retired, it drains only once the work ends")
    func backgroundWork() async throws {
        let events = Events()
        let work = WorkBox()
        try await Self.withLifecycle(Self.registry(events, work: work)) { lifecycle, spec in
            let (active, _) = await lifecycle.adopt(try await lifecycle.build(spec("{probe: {name: a}}")))
            let started = Signals<Void>(), gate = Latch(), finished = Latch()
            // As a handler starts it: while answering a request, which holds a lease.
            let lease = active.lease()
            try #require(work.work.withLock { $0 }).start {
                started.send(())
                await gate.wait()
                finished.open()
            }
            lease.end()
            _ = await started.next()
            let (_, replaced) = await lifecycle.adopt(try await lifecycle.build(spec("{probe: {name: a}}")))
            let old = try #require(replaced)
            #expect(old.serving.requestsInFlight == 1 && !old.serving.isDrained, "the work holds it")
            gate.open()
            await old.serving.drained()
            #expect(finished.isOpen)
        }
    }
}
