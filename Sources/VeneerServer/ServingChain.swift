import Synchronization
import VeneerCore

/// One generation of the chain as the edge serves it: the plan to answer through, what the
/// edge checks before the chain sees a request, and the requests in it (``GenerationLease``).
///
/// While it is current it holds itself: its count never reaches zero. ``retire()`` (after a
/// reload swapped it out, or at shutdown) drops that hold, and the lease that takes the count
/// to zero wakes whoever awaits ``drained()``: no polling, and no cost per request beyond
/// the one atomic add and subtract.
public final class ServingChain: Sendable {
    /// How requests are answered (and by which outermost handler).
    public let plan: ChainPlan
    /// The collections exposed.
    public let resources: [Resource]
    /// The largest request body accepted.
    public let requestBodyLimit: Int
    /// The Host names and Origins answered for.
    public let access: EdgeAccess
    /// The forwarding headers stripped from callers' requests.
    public let forwarding: ForwardingHeaders
    /// Whether answers through the chain carry `Server-Timing` (the environment's `trace`).
    public let trace: Bool
    /// Whether request bodies of the resources declared `body: stream` stream to the chain:
    /// one of them is, and no handler of the chain reads request bodies whole
    /// (``VeneerCore/ReadsRequestBodies``).
    public let streamsRequestBodies: Bool
    /// Leases held, plus one while current.
    private let count = Atomic<Int>(1)
    private let retired = Atomic<Bool>(false)
    private let drain = Latch()

    /// A chain to serve, behind the Host and Origin checks of `access` (there is no edge
    /// without them).
    public init(plan: ChainPlan, resources: [Resource], requestBodyLimit: Int, access: EdgeAccess,
                forwarding: ForwardingHeaders = ForwardingHeaders(), trace: Bool = false, readsRequestBodies: Bool = false) {
        self.plan = plan
        streamsRequestBodies = !readsRequestBodies && resources.contains(where: \.streamsBodies)
        self.resources = resources
        self.requestBodyLimit = requestBodyLimit
        self.access = access
        self.forwarding = forwarding
        self.trace = trace
    }

    /// Requests that hold a lease on this chain.
    public var requestsInFlight: Int {
        let held = count.load(ordering: .relaxed)
        return retired.load(ordering: .relaxed) ? held : held - 1
    }

    /// Whether it was retired and its last lease has ended.
    public var isDrained: Bool { drain.isOpen }

    /// No longer serves new requests (the caller swapped it out where leases are taken):
    /// ``drained()`` returns once the leases still held have ended. Idempotent.
    public func retire() {
        guard retired.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged else { return }
        release()
    }

    /// Returns once the chain is retired and no request holds a lease on it (at once if that
    /// is already so), or when the calling task is cancelled.
    public func drained() async {
        await drain.wait()
    }

    /// A lease taken: only by ``GenerationLease``, where the chain is current (or by a lease
    /// already held on it, so the count cannot have reached zero).
    fileprivate func acquire() {
        count.wrappingAdd(1, ordering: .relaxed)
    }

    /// A lease (or the hold of being current) ended; the last one wakes the waiters.
    fileprivate func release() {
        // Releasing: what the request did happens before whatever follows the drain (closing
        // the objects the old chain used); the last one acquires all of that.
        guard count.wrappingSubtract(1, ordering: .acquiringAndReleasing).newValue == 0 else { return }
        drain.open()
    }
}

/// One request's hold on the generation it entered: taken by ``ChainSource/lease()`` while
/// the generation is current, and ended exactly once, by ownership rather than by hand.
///
/// It cannot be copied. It ends where it is consumed (``end()``) or where its owner goes (the
/// ``ProxyEdge/Pending`` that carries it). To cross an escaping closure that runs exactly
/// once (the callback of ``CallbackAnswering``, a task's body) it is handed over as a
/// ``LeaseHandOver``, which that closure ends: Swift would box a noncopyable value captured
/// by an escaping closure, an allocation per request on the pass-through path. It is one
/// reference: taking, carrying and handing it over allocate nothing.
public struct GenerationLease: ~Copyable, Sendable {
    /// Retained by the lease; unmanaged so that ``handOver()`` can pass it on without ending it.
    private let held: Unmanaged<ServingChain>

    /// Enters `chain` for one request. Only where `chain` is current (``ChainSource/lease()``
    /// takes it under the lock that a reload swaps the chain under).
    package init(entering chain: ServingChain) {
        chain.acquire()
        held = .passRetained(chain)
    }

    /// Takes back a lease that was handed over and not ended (a start by callback that was
    /// declined, whose callback will never run).
    package init(resuming handOver: LeaseHandOver) {
        held = .passRetained(handOver.chain)
    }

    /// The generation the request entered.
    public var chain: ServingChain { held.takeUnretainedValue() }

    /// Ends the lease now.
    public consuming func end() {}

    /// The lease as a closure that runs exactly once carries it; that closure ends it.
    package consuming func handOver() -> LeaseHandOver {
        let held = self.held
        discard self
        return LeaseHandOver(chain: held.takeRetainedValue())
    }

    deinit {
        held.takeUnretainedValue().release()
        held.release()
    }
}

/// A ``GenerationLease`` on its way through a closure that runs exactly once (a callback
/// that ``CallbackAnswering`` promises to call once, a task's body): copyable, so that the
/// closure holds it inline; the closure calls ``end()`` once, and nothing else does.
package struct LeaseHandOver: Sendable {
    fileprivate let chain: ServingChain

    /// Ends the lease.
    package func end() {
        chain.release()
    }
}

/// Where the edge finds the chain for each request: the runtime's active chain, which a
/// reload swaps while requests in flight finish on the chain they entered.
public protocol ChainSource: Sendable {
    /// A lease on the chain serving new requests, for one request.
    func lease() -> GenerationLease
    /// The chain serving new requests, for what is read before a request begins (its body limit).
    var current: ServingChain { get }
}
