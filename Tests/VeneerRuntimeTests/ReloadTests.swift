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
            #expect(veneer.instance.chain.generation.number == 1)
        }
    }

    @Test("a request in flight during a reload finishes on the chain it entered")
    func inFlight() async throws {
        let box = YAMLBox(yaml(["old"], latency: "500ms"))
        try await withVeneer(yaml: "", registry: extendedRegistry, yamlProvider: { box.value }) { (veneer: RunningVeneer) async throws in
            async let slow = veneer.request("GET", "/posts")
            while veneer.instance.chain.generation.requestsInFlight == 0 { try await Task.sleep(for: .milliseconds(5)) }
            box.set(yaml(["new"]))
            _ = await veneer.instance.reload()
            let fresh = try await veneer.request("GET", "/posts")
            #expect(fresh.header("X-Trail") == "new")
            #expect(try await slow.header("X-Trail") == "old")
        }
    }
}
