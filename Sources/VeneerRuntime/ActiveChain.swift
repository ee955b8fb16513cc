import Foundation
import Synchronization
import VeneerConfig
import VeneerCore
import VeneerServer

/// One built chain: its handler and plan, what it was built from, and how many requests are in it.
public final class ChainGeneration: Sendable {
    /// The outermost handler (the first decorator, or the origin).
    public let handler: any Handler
    /// Each entry's name and handler, outermost first, the origin last (for the status page).
    public let entries: [(name: String, handler: any Handler)]
    /// What the server serves: the plan, what every request reads of ``spec`` (kept apart so
    /// that a request does not copy the whole specification), the requests in flight.
    public let serving: ServingChain
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
    /// The work its handlers started in the background (its drain waits for it).
    let work: GenerationWork

    init(chain: BuiltChain, spec: EnvironmentSpec, loadedAt: Date, number: Int, carried: CarriedState, adminRoutes: AdminRoutes,
         work: GenerationWork) {
        handler = chain.handler
        entries = chain.entries
        serving = ServingChain(plan: chain.plan, resources: spec.resources, requestBodyLimit: spec.limits.requestBody, access: spec.access,
                               forwarding: ForwardingHeaders(passing: spec.passForwardingHeaders), trace: spec.trace,
                               readsRequestBodies: chain.entries.contains { $0.handler is any ReadsRequestBodies })
        self.spec = spec
        self.loadedAt = loadedAt
        self.number = number
        self.carried = carried
        self.adminRoutes = adminRoutes
        self.work = work
    }

    /// How the server answers through it.
    public var plan: ChainPlan { serving.plan }

    /// Requests that entered this chain and have not left it, and background work its
    /// handlers started that has not ended.
    public var requestsInFlight: Int { serving.requestsInFlight }
}

/// The chain that serves new requests, swapped atomically on reload: a request keeps the
/// generation it entered until it leaves, so in-flight requests finish on the old chain.
public final class ActiveChain: ChainSource {
    private let slot: Mutex<ChainGeneration>

    init(_ first: ChainGeneration) {
        slot = Mutex(first)
    }

    /// The generation serving new requests.
    public var generation: ChainGeneration { slot.withLock { $0 } }

    /// The chain serving new requests, as the edge serves it.
    public var current: ServingChain { generation.serving }

    /// A lease on the current generation for one request, taken under the lock that
    /// ``swap(to:)`` takes: once swapped out, a generation gets no new lease.
    public func lease() -> GenerationLease {
        slot.withLock { generation in GenerationLease(entering: generation.serving) }
    }

    /// Makes `next` serve new requests; returns the one it replaces.
    func swap(to next: ChainGeneration) -> ChainGeneration {
        slot.withLock { generation in
            let old = generation
            generation = next
            return old
        }
    }
}
