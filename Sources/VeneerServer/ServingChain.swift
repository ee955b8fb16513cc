import Synchronization
import VeneerCore

/// One generation of the chain as the edge serves it: the plan to answer through, what the
/// edge checks before the chain sees a request, and how many requests are in it.
public final class ServingChain: Sendable {
    /// How requests are answered (and by which outermost handler).
    public let plan: ChainPlan
    /// The collections exposed.
    public let resources: [Resource]
    /// The largest request body accepted.
    public let requestBodyLimit: Int
    private let inFlight = Atomic<Int>(0)

    /// A chain to serve.
    public init(plan: ChainPlan, resources: [Resource], requestBodyLimit: Int) {
        self.plan = plan
        self.resources = resources
        self.requestBodyLimit = requestBodyLimit
    }

    /// Requests that entered this chain and have not left it.
    public var requestsInFlight: Int { inFlight.load(ordering: .relaxed) }

    /// A request enters (``ChainSource/enter()`` does it while the chain is current).
    package func enter() { inFlight.wrappingAdd(1, ordering: .relaxed) }
    /// The request that entered is answered.
    package func leave() { inFlight.wrappingSubtract(1, ordering: .relaxed) }
}

/// Where the edge finds the chain for each request: the runtime's active chain, which a
/// reload swaps while requests in flight finish on the chain they entered.
public protocol ChainSource: Sendable {
    /// The chain serving new requests, entered (``ServingChain/enter()``) for one request;
    /// the edge leaves it once the request is answered.
    func enter() -> ServingChain
    /// The chain serving new requests, for what is read before a request begins (its body limit).
    var current: ServingChain { get }
}
