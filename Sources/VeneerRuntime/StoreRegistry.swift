import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import VeneerConfig
import VeneerCore
import VeneerStores

/// Opens the named stores of an environment on first use, one instance per store
/// definition, shared by every decorator that names it and kept across reloads while the
/// definition stays the same. A store with connections to run (postgres) is handed to
/// `runner` as it opens, so that it serves the build that opened it.
final class StoreRegistry: StoreProvider, Sendable {
    let specs: [String: StoreSpec]
    let carried: CarriedState
    let health: HealthBoard
    let logger: Logger
    let runner: BackgroundRunner
    private let opening = Mutex<[CarriedKey: Task<any KeyValueStore, any Error>]>([:])

    init(specs: [String: StoreSpec], carried: CarriedState, health: HealthBoard, logger: Logger, runner: BackgroundRunner) {
        self.specs = specs
        self.carried = carried
        self.health = health
        self.logger = logger
        self.runner = runner
    }

    func store(named name: String) async throws -> any KeyValueStore {
        if name == "memory" {
            return carried.value(for: .shared("store", "memory")) { CarriedStore(store: MemoryStore(), health: health, name: name) }.store
        }
        guard let spec = specs[name] else { throw StoreError(store: name, reason: "no store named '\(name)'") }
        let key = CarriedKey.shared("store", name, spec)
        let task: Task<any KeyValueStore, any Error> = opening.withLock { opening in
            if let existing = opening[key] { return existing }
            let carried = self.carried, health = self.health, logger = self.logger, runner = self.runner
            // One opening per store, however many decorators ask at once (not a loop: it
            // ends when the store is open).
            let task = Task<any KeyValueStore, any Error> {
                if let kept = carried.existing(for: key) as? any HeldStore { return kept.store }
                let store = try await Self.open(spec, logger: logger) { problem in
                    if let problem { health.report("store \(name)", .degraded(problem)) } else { health.remove("store \(name)") }
                }
                if let problem = store.memoryOnlyReason {
                    health.report("store \(name)", .degraded(problem))
                }
                let held: any HeldStore = carried.value(for: key) {
                    let plain = CarriedStore(store: store, health: health, name: name)
                    if let service = store as? any Service { return RunningStore(plain, service: service) as any HeldStore }
                    return plain
                }
                if let running = held as? RunningStore { runner.adopt([running]) }
                return held.store
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

/// A store as the chains hold it.
protocol HeldStore: Sendable {
    var store: any KeyValueStore { get }
    /// The store's name in the configuration (`memory` for the built-in one).
    var name: String { get }
}

/// A store held by the chains, closed once none of them names it.
struct CarriedStore: CarriedResource, HeldStore {
    let store: any KeyValueStore
    let health: HealthBoard
    let name: String

    func close() async {
        health.remove("store \(name)")
        await store.close()
    }
}

/// A store with connections of its own (postgres), run by the runtime's store runner from
/// the moment it opens until no chain names it (then closed) or Veneer stops. A class: the
/// runner knows a service by its identity, and the store must never run twice.
final class RunningStore: CarriedService, HeldStore {
    let held: CarriedStore
    let service: any Service

    init(_ held: CarriedStore, service: any Service) {
        self.held = held
        self.service = service
    }

    var store: any KeyValueStore { held.store }
    var name: String { held.name }

    func run() async {
        do {
            try await service.run()
        } catch {
            held.health.report("store \(held.name)", .degraded("stopped: \(error)"))
        }
    }

    func close() async { await held.close() }
}

extension StoreRegistry {
    /// Opens `spec` for the length of `body`, running its connections meanwhile (for
    /// `veneer unblock` without a running instance), and closes it.
    static func withOpened<T: Sendable>(_ spec: StoreSpec, logger: Logger, _ body: (any KeyValueStore) async throws -> T) async throws -> T {
        let store = try await open(spec, logger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            if let service = store as? any Service {
                group.addTask { try await service.run() }
            }
            defer { group.cancelAll() }
            do {
                let result = try await body(store)
                await store.close()
                return result
            } catch {
                await store.close()
                throw error
            }
        }
    }
}
