import Foundation
import Testing
import VeneerCore
import VeneerRuntime
import VeneerTestSupport

@Suite("Carried state: what a reload keeps, by entry identity")
struct CarriedStateTests {
    func yaml(_ upstream: TestUpstream, _ chain: String) -> String {
        "environments: {development: {origin: {upstream: {url: \"\(upstream.url)\"}}, chain: [\(chain)]}}"
    }

    @Test("two identical caches in one chain each have their own storage: the first miss is answered")
    func identicalCaches() async throws {
        try await withTestUpstream({ _ in post(1) }) { (upstream: TestUpstream) async throws in
            try await withVeneer(yaml: yaml(upstream, "{cache: {ttl: 1h}}, {cache: {ttl: 1h}}")) { (veneer: RunningVeneer) async throws in
                let first = try await veneer.request("GET", "/posts/1")
                #expect(first.status == 200)
                #expect(first.headers("Cache-Status").joined(separator: ", ").contains("stored"))
                let second = try await veneer.request("GET", "/posts/1")
                #expect(second.header("Cache-Status")?.hasPrefix("veneer; hit") == true)
                #expect(upstream.count == 1)
            }
        }
    }

    @Test("the two identical caches hold two storages, kept apart by their rank")
    func identicalCachesAreIndependent() async throws {
        try await withTestUpstream({ _ in post(1) }) { (upstream: TestUpstream) async throws in
            try await withVeneer(yaml: yaml(upstream, "{cache: {ttl: 1h}}, {cache: {ttl: 1h}}")) { (veneer: RunningVeneer) async throws in
                let carried = veneer.chain.generation.carried
                #expect(carried.keys.map(\.description) == ["cache#0", "cache#1"])
                #expect(Set(objects(carried)).count == 2)
            }
        }
    }

    @Test("decorators added around two caches keep both warm, each with its own storage")
    func insertionKeepsEveryCache() async throws {
        try await withTestUpstream({ _ in post(1) }) { (upstream: TestUpstream) async throws in
            let box = YAMLBox(yaml(upstream, "{cache: {ttl: 1h}}, {cache: {ttl: 1h}}"))
            try await withVeneer(yaml: "", yamlProvider: { box.value }) { (veneer: RunningVeneer) async throws in
                _ = try await veneer.request("GET", "/posts/1")
                let before = objects(veneer.chain.generation.carried)
                box.set(yaml(upstream, "latency_log, {cache: {ttl: 1h}}, {block_list: {}}, {cache: {ttl: 1h}}"))
                let next = try await veneer.instance.reload().get()
                #expect(Set(before).isSubset(of: objects(next.carried)))
                #expect(next.carried.released().isEmpty)
                #expect(try await veneer.request("GET", "/posts/1").header("Cache-Status")?.hasPrefix("veneer; hit") == true)
                #expect(upstream.count == 1)
            }
        }
    }

    @Test("a cache whose options change starts with a fresh storage; the old one is released")
    func changedOptions() async throws {
        try await withTestUpstream({ _ in post(1) }) { (upstream: TestUpstream) async throws in
            let box = YAMLBox(yaml(upstream, "{cache: {ttl: 1h}}"))
            try await withVeneer(yaml: "", yamlProvider: { box.value }) { (veneer: RunningVeneer) async throws in
                _ = try await veneer.request("GET", "/posts/1")
                let before = objects(veneer.chain.generation.carried)
                box.set(yaml(upstream, "{cache: {ttl: 2h}}"))
                let next = try await veneer.instance.reload().get()
                #expect(Set(before).isDisjoint(with: objects(next.carried)))
                #expect(next.carried.released().count == 1)
                #expect(try await veneer.request("GET", "/posts/1").header("Cache-Status")?.contains("fwd=uri-miss") == true)
                #expect(upstream.count == 2)
            }
        }
    }

    @Test("a reload to the identical configuration carries every object over and releases nothing")
    func identicalReload() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("veneer-carried-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await withTestUpstream({ _ in post(1) }) { (upstream: TestUpstream) async throws in
            let text = """
                state_dir: \(directory)
                stores: { local: { sqlite: veneer.sqlite } }
                environments:
                  development:
                    origin: { upstream: { url: "\(upstream.url)" } }
                    chain:
                      - latency_log: { file: \(directory)/latency.log }
                      - cache: { ttl: 1h, store: local }
                      - block_list: { store: local }
                      - cache: { ttl: 1h }
                """
            try await withVeneer(yaml: text) { (veneer: RunningVeneer) async throws in
                _ = try await veneer.request("GET", "/posts/1")
                let first = veneer.chain.generation.carried
                let next = try await veneer.instance.reload().get()
                #expect(next.number == 2)
                #expect(Set(next.carried.keys) == Set(first.keys))
                // Both caches are the first of their kind (their options differ); the store,
                // its blocks and the log file are shared by what they are.
                #expect(first.keys.map(\.description).map { $0.replacingOccurrences(of: directory, with: "D") }.sorted() == [
                    "block_list(sqlite:D/veneer.sqlite)", "cache#0", "cache#0", "latency_log.file(D/latency.log)",
                    "store(local, sqlite:D/veneer.sqlite)",
                ])
                #expect(objects(next.carried) == objects(first))
                #expect(next.carried.released().isEmpty)
                #expect(try await veneer.request("GET", "/posts/1").header("Cache-Status")?.hasPrefix("veneer; hit") == true)
            }
        }
    }

    @Test("a store redefined under the same name gives its cache and its blocks fresh state over the new store")
    func redefinedStore() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("veneer-carried-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await withTestUpstream({ _ in post(1) }) { (upstream: TestUpstream) async throws in
            func text(_ file: String) -> String {
                """
                state_dir: \(directory)
                stores: { local: { sqlite: \(file) } }
                environments:
                  development:
                    origin: { upstream: { url: "\(upstream.url)" } }
                    chain: [{ cache: { ttl: 1h, store: local } }, { block_list: { store: local } }]
                """
            }
            let box = YAMLBox(text("a.sqlite"))
            try await withVeneer(yaml: "", yamlProvider: { box.value }) { (veneer: RunningVeneer) async throws in
                _ = try await veneer.request("GET", "/posts/1")
                box.set(text("b.sqlite"))
                let next = try await veneer.instance.reload().get()
                // The old store, and the cache storage and the blocks that wrote to it: none of
                // them may keep serving over a store that is about to be closed.
                #expect(next.carried.released().count == 3)
                #expect(try await veneer.request("GET", "/posts/1").header("Cache-Status")?.contains("fwd=uri-miss") == true)
            }
        }
    }
}

/// The identities of the objects `carried` holds, sorted.
func objects(_ carried: CarriedState) -> [ObjectIdentifier] {
    carried.all.compactMap { value in type(of: value) is AnyClass ? ObjectIdentifier(value as AnyObject) : nil }.sorted { $0.hashValue < $1.hashValue }
}
