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
    /// Leases held, plus one while current.
    private let count = Atomic<Int>(1)
    private let retired = Atomic<Bool>(false)
    private let drain = Latch()

    /// A chain to serve.
    public init(plan: ChainPlan, resources: [Resource], requestBodyLimit: Int) {
        self.plan = plan
        self.resources = resources
        self.requestBodyLimit = requestBodyLimit
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
/// It cannot be copied. It ends where it is consumed (``end()``) or where its owner goes: the
/// ``ProxyEdge/Pending`` that carries it, the callback or the task that captured that, which
/// the Swift runtime destroys once it has run (or is dropped unrun). So an answer given at
/// once, by callback, in a task, a thrown error or a cancelled task all end it, and none can
/// end it twice. It is a reference and nothing else: taking and carrying it allocates nothing.
public struct GenerationLease: ~Copyable, Sendable {
    /// The generation the request entered.
    public let chain: ServingChain

    /// Enters `chain` for one request. Only where `chain` is current (``ChainSource/lease()``
    /// takes it under the lock that a reload swaps the chain under).
    package init(entering chain: ServingChain) {
        chain.acquire()
        self.chain = chain
    }

    /// A second lease on the generation `other` holds: the request goes on somewhere else
    /// (a start by callback that was declined goes on in a task) before `other` ends, so the
    /// generation cannot drain in between.
    package init(alongside other: borrowing GenerationLease) {
        other.chain.acquire()
        chain = other.chain
    }

    /// Ends the lease now.
    public consuming func end() {}

    deinit {
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
