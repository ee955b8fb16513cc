import Foundation
import Synchronization
import Testing
import VeneerConfig
import VeneerCore
import VeneerRuntime
import VeneerTestSupport

final class YAMLBox: Sendable {
    private let text: Mutex<String>
    init(_ text: String) { self.text = Mutex(text) }
    var value: String { text.withLock { $0 } }
    func set(_ value: String) { text.withLock { $0 = value } }
}

@Suite("Reload: swap the chain atomically, keep the old one on a bad file")
struct ReloadTests {
    func yaml(_ tags: [String], latency: String = "0s") -> String {
        """
        environments:
          development:
            origin: { mock: { latency: \(latency) } }
            chain: [\(tags.map { "{tag: {name: \($0)}}" }.joined(separator: ", "))]
        """
    }

    @Test("a good file replaces the chain; the mock's posts carry over")
    func goodReload() async throws {
        let box = YAMLBox(yaml(["a"]))
        try await withVeneer(yaml: "", registry: extendedRegistry, yamlProvider: { box.value }) { (veneer: RunningVeneer) async throws in
            #expect(try await veneer.request("POST", "/posts", body: #"{"title":"kept","body":"b"}"#).header("X-Trail") == "a")
            box.set(yaml(["b", "c"]))
            let result = await veneer.instance.reload()
            #expect((try? result.get())?.number == 2)
            let after = try await veneer.request("GET", "/posts/1")
            #expect(after.header("X-Trail") == "c,b")
            #expect(after.json?["title"] as? String == "kept")
        }
    }

    @Test("a bad file is reported with every error and the old chain keeps serving")
    func badReload() async throws {
        let box = YAMLBox(yaml(["a"]))
        try await withVeneer(yaml: "", registry: extendedRegistry, yamlProvider: { box.value }) { (veneer: RunningVeneer) async throws in
            box.set("environments: {development: {origin: {mock: {}}, chain: [tga, {tag: {nmae: x}}]}}")
            guard case .failure(let error) = await veneer.instance.reload() else {
                Issue.record("the reload should fail")
                return
            }
            #expect(error.diagnostics.count == 3)  // unknown decorator, unknown key, missing name
            #expect(try await veneer.request("GET", "/posts").header("X-Trail") == "a")
            let health = try await veneer.request("GET", "/-/health")
            #expect(health.status == 200)
            #expect((health.json?["last_reload_error"] as? String)?.contains("unknown decorator 'tga'") == true)
            #expect(veneer.chain.generation.number == 1)
        }
    }

    @Test("a request in flight during a reload finishes on the chain it entered")
    func inFlight() async throws {
        let box = YAMLBox(yaml(["old"], latency: "500ms"))
        // The mock's latency runs on this clock: the request stays in flight until the test moves it.
        let clock = ManualClock()
        try await withVeneer(yaml: "", registry: extendedRegistry, clock: clock, yamlProvider: { box.value }) { (veneer: RunningVeneer) async throws in
            async let slow = veneer.request("GET", "/posts")
            try await eventually("the slow request is in the chain") { veneer.chain.generation.requestsInFlight > 0 }
            box.set(yaml(["new"]))
            _ = await veneer.instance.reload()
            let fresh = try await veneer.request("GET", "/posts")
            #expect(fresh.header("X-Trail") == "new")
            clock.advance(by: .seconds(1))
            #expect(try await slow.header("X-Trail") == "old")
        }
    }

    @Test("reloads asked for at once run one after another, in order, each waiting for its turn")
    func serialised() async throws {
        let builds = Mutex<[String]>([])
        let firstReload = Latch()
        let building = Signals<Int>()
        var registry = extendedRegistry
        registry.register(DecoratorFactory(name: "slow_build", summary: "holds the second build at a gate", options: [],
                                           decode: { _, _ in true },
                                           make: { _, inner, _ in
                                               let number = builds.withLock { $0.count / 2 + 1 }
                                               builds.withLock { $0.append("begin \(number)") }
                                               building.send(number)
                                               if number == 2 { await firstReload.wait() }
                                               builds.withLock { $0.append("end \(number)") }
                                               return inner
                                           }))
        let text = "environments: {development: {origin: {mock: {}}, chain: [slow_build]}}"
        try await withVeneer(yaml: text, registry: registry) { (veneer: RunningVeneer) async throws in
            #expect(await building.next() == 1)
            let first = Task { await veneer.instance.reload() }
            #expect(await building.next() == 2)
            let second = Task { await veneer.instance.reload() }
            // A round trip through the server: time enough for the second reload to begin a
            // build of its own, if it did not wait for its turn.
            #expect(try await veneer.request("GET", "/posts").status == 200)
            #expect(builds.withLock { $0 } == ["begin 1", "end 1", "begin 2"])
            firstReload.open()
            #expect((try await first.value.get()).number == 2)
            #expect((try await second.value.get()).number == 3)
            #expect(builds.withLock { $0 } == ["begin 1", "end 1", "begin 2", "end 2", "begin 3", "end 3"])
        }
    }

    @Test("what a reload no longer uses is closed once the old generation's last request has left it, not before")
    func releaseAfterDrain() async throws {
        let events = Mutex<[String]>([])
        let closed = Signals<Void>()
        let entered = Signals<Void>()
        let gate = Latch()
        var registry = extendedRegistry
        registry.register(DecoratorFactory(name: "hold", summary: "holds requests at a gate", options: [], decode: { _, _ in true },
                                           make: { _, inner, _ in
                                               RecordingHandler { request in
                                                   entered.send(())
                                                   await gate.wait()
                                                   events.withLock { $0.append("old request leaves") }
                                                   return try await inner.handle(request)
                                               }
                                           }))
        registry.register(DecoratorFactory(name: "owner", summary: "owns a resource", options: [OptionDoc("name", "text", "name")],
                                           decode: { mapping, _ in mapping.string("name", required: true) },
                                           make: { name, inner, context in
                                               _ = context.carried.value(for: context.entryKey()) {
                                                   ClosingProbe { events.withLock { $0.append("\(name) closed") }; closed.send(()) }
                                               }
                                               return inner
                                           }))
        let box = YAMLBox("environments: {development: {origin: {mock: {}}, chain: [hold, {owner: {name: a}}]}}")
        try await withVeneer(yaml: "", registry: registry, yamlProvider: { box.value }) { (veneer: RunningVeneer) async throws in
            async let held = veneer.request("GET", "/posts")
            _ = await entered.next()
            box.set("environments: {development: {origin: {mock: {}}, chain: [{owner: {name: b}}]}}")
            _ = try await veneer.instance.reload().get()
            #expect(try await veneer.request("GET", "/posts").status == 200, "the new chain serves meanwhile")
            gate.open()
            #expect(try await held.status == 200)
            _ = await closed.next()
            #expect(events.withLock { $0 } == ["old request leaves", "a closed"])
        }
    }
}

/// A carried resource that reports its closing.
final class ClosingProbe: CarriedResource {
    let onClose: @Sendable () -> Void
    init(onClose: @escaping @Sendable () -> Void) { self.onClose = onClose }
    func close() async { onClose() }
}
