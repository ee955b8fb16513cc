import Foundation
import Logging
import Synchronization
import VeneerConfig
import VeneerCore
import VeneerStores

/// Opens the named stores of an environment on first use, one instance per store
/// definition, shared by every decorator that names it and kept across reloads while the
/// definition stays the same.
final class StoreRegistry: StoreProvider, Sendable {
    let specs: [String: StoreSpec]
    let carried: CarriedState
    let health: HealthBoard
    let logger: Logger
    private let opening = Mutex<[CarriedKey: Task<any KeyValueStore, any Error>]>([:])

    init(specs: [String: StoreSpec], carried: CarriedState, health: HealthBoard, logger: Logger) {
        self.specs = specs
        self.carried = carried
        self.health = health
        self.logger = logger
    }

    func store(named name: String) async throws -> any KeyValueStore {
        if name == "memory" {
            return carried.value(for: .shared("store", "memory")) { CarriedStore(store: MemoryStore(), health: health, name: name) }.store
        }
        guard let spec = specs[name] else { throw StoreError(store: name, reason: "no store named '\(name)'") }
        let key = CarriedKey.shared("store", name, spec)
        let task: Task<any KeyValueStore, any Error> = opening.withLock { opening in
            if let existing = opening[key] { return existing }
            let carried = self.carried, health = self.health, logger = self.logger
            let task = Task<any KeyValueStore, any Error> {
                if let kept = carried.existing(for: key) as? CarriedStore { return kept.store }
                let store = try await Self.open(spec, logger: logger) { problem in
                    if let problem { health.report("store \(name)", .degraded(problem)) } else { health.remove("store \(name)") }
                }
                if let sqlite = store as? SQLiteStore, let problem = sqlite.problem {
                    health.report("store \(name)", .degraded(problem))
                }
                return carried.value(for: key) { CarriedStore(store: store, health: health, name: name) }.store
            }
            opening[key] = task
            return task
        }
        return try await task.value
    }

    static func open(_ spec: StoreSpec, logger: Logger, onHealth: @escaping @Sendable (String?) -> Void = { _ in }) async throws -> any KeyValueStore {
        switch spec {
        case .sqlite(let path):
            return await SQLiteStore.open(path: path, logger: logger)
        case .postgres(let url, let password):
            return try PostgresStore.open(url: url, password: password, logger: logger, onHealth: onHealth)
        }
    }
}

/// A store held by the chains, closed once none of them names it.
struct CarriedStore: CarriedResource {
    let store: any KeyValueStore
    let health: HealthBoard
    let name: String

    func close() async {
        health.remove("store \(name)")
        await store.close()
    }
}
