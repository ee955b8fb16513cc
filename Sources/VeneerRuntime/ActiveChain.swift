import Foundation
import Synchronization
import VeneerConfig
import VeneerCore

/// One built chain: its handler and plan, what it was built from, and how many requests are in it.
public final class ChainGeneration: Sendable {
    /// The outermost handler (the first decorator, or the origin).
    public let handler: any Handler
    /// How the server answers through it.
    public let plan: ChainPlan
    /// The environment it was built from.
    public let spec: EnvironmentSpec
    /// When it was built.
    public let loadedAt: Date
    /// 1 for the chain built at start, then one more per successful reload.
    public let number: Int
    /// The state it holds (what a reload may carry over).
    public let carried: CarriedState
    /// The admin routes its decorators added.
    public let adminRoutes: AdminRoutes
    /// What every request reads of ``spec``, kept apart so that a request does not copy the
    /// whole specification.
    let resources: [Resource]
    let requestBodyLimit: Int
    private let inFlight = Atomic<Int>(0)

    init(chain: BuiltChain, spec: EnvironmentSpec, loadedAt: Date, number: Int, carried: CarriedState, adminRoutes: AdminRoutes) {
        handler = chain.handler
        plan = chain.plan
        self.spec = spec
        resources = spec.resources
        requestBodyLimit = spec.limits.requestBody
        self.loadedAt = loadedAt
        self.number = number
        self.carried = carried
        self.adminRoutes = adminRoutes
    }

    /// Requests that entered this chain and have not left it.
    public var requestsInFlight: Int { inFlight.load(ordering: .relaxed) }

    func enter() { inFlight.wrappingAdd(1, ordering: .relaxed) }
    func leave() { inFlight.wrappingSubtract(1, ordering: .relaxed) }
}

/// The chain that serves new requests, swapped atomically on reload: a request keeps the
/// generation it entered until it leaves, so in-flight requests finish on the old chain.
public final class ActiveChain: Sendable {
    private let current: Mutex<ChainGeneration>

    init(_ first: ChainGeneration) {
        current = Mutex(first)
    }

    /// The generation serving new requests.
    public var generation: ChainGeneration { current.withLock { $0 } }

    /// Takes the current generation for one request; call ``ChainGeneration/leave()`` after.
    func enter() -> ChainGeneration {
        current.withLock { generation in
            generation.enter()
            return generation
        }
    }

    /// Makes `next` serve new requests; returns the one it replaces.
    func swap(to next: ChainGeneration) -> ChainGeneration {
        current.withLock { generation in
            let old = generation
            generation = next
            return old
        }
    }
}
