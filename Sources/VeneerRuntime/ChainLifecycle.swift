import Foundation
import Logging
import Synchronization
import VeneerConfig
import VeneerCore
import VeneerServer

/// The life of an instance's chains, one generation after another, kept apart from reading
/// the configuration and from serving it:
///
/// - ``build(_:)`` makes a chain of a spec, with the state the serving chain carries over,
///   and serves nothing: a build that fails releases what it opened afresh;
/// - ``adopt(_:)`` makes a built chain serve: its background loops and stores run, it is
///   swapped in where requests take their leases, what its factories deferred happens, the
///   generation it replaced is retired, and what no chain holds any more is released once
///   that generation has drained (its last request and its background work ended);
/// - ``discard(_:)`` drops a built chain that will not serve;
/// - ``releaseAll()`` closes what the last chain held, at the very end.
///
/// One build at a time, adopted before the next build (the instance's ``ReloadQueue``).
final class ChainLifecycle: Sendable {
    /// The build context of a chain of `spec` over `carried` (the instance's clock, metrics,
    /// transports, stores).
    typealias MakeContext = @Sendable (_ spec: EnvironmentSpec, _ carried: CarriedState) -> BuildContext

    private let makeContext: MakeContext
    private let clock: any VeneerClock
    /// The background loops of carried state, background work, and what waits for a drain.
    private let background: BackgroundRunner
    /// The stores with connections of their own (shut down after the loops that use them).
    private let storeRunner: BackgroundRunner
    private let logger: Logger
    private let active = Mutex<ActiveChain?>(nil)

    init(makeContext: @escaping MakeContext, clock: any VeneerClock, background: BackgroundRunner, storeRunner: BackgroundRunner, logger: Logger) {
        self.makeContext = makeContext
        self.clock = clock
        self.background = background
        self.storeRunner = storeRunner
        self.logger = logger
    }

    /// The chain serving, once the first one was adopted.
    var chain: ActiveChain? { active.withLock { $0 } }

    /// The generation serving new requests, if one does.
    var serving: ChainGeneration? { chain?.generation }

    /// A chain of `spec` that does not serve yet: generation 1 with fresh state, or the next
    /// of the one serving with what it carries over. On failure every problem, and what the
    /// build opened afresh (a store) is released.
    func build(_ spec: EnvironmentSpec) async throws(ConfigError) -> ChainGeneration {
        let previous = serving
        let carried = previous?.carried.next() ?? CarriedState()
        var context = makeContext(spec, carried)
        let work = GenerationWork(runner: background)
        context.backgroundWork = work
        do {
            let built = try await ChainBuilder.build(spec, context: context)
            return ChainGeneration(chain: built, spec: spec, loadedAt: clock.now(), number: (previous?.number ?? 0) + 1, carried: carried,
                                   adminRoutes: context.admin, work: work)
        } catch {
            await release(carried.fresh())
            throw error
        }
    }

    /// Makes `next` (built by ``build(_:)`` from the generation serving now) serve new
    /// requests; returns the active chain and the generation `next` replaced, retired (nil
    /// for the first).
    @discardableResult
    func adopt(_ next: ChainGeneration) async -> (active: ActiveChain, replaced: ChainGeneration?) {
        let all = next.carried.all
        storeRunner.adopt(all.filter { $0 is RunningStore })
        background.adopt(all.filter { !($0 is RunningStore) })
        next.work.serve(next.serving)
        let (chain, old) = active.withLock { active -> (ActiveChain, ChainGeneration?) in
            guard let chain = active else {
                let first = ActiveChain(next)
                active = first
                return (first, nil)
            }
            precondition(next.number == chain.generation.number + 1, "generation \(next.number) was not built from generation \(chain.generation.number)")
            return (chain, chain.swap(to: next))
        }
        // Only now may the build's changes to state the old chain shares take effect.
        await next.carried.commit()
        guard let old else { return (chain, nil) }
        // No new request enters the old generation: it drains as its last ones finish.
        old.serving.retire()
        let released = next.carried.released()
        if !released.isEmpty {
            // Closed once the old chain's last request (and background work) has left it.
            background.whenDrained(old.serving) { [self] in
                await release(released)
                logger.debug("released \(released.count) object(s) of chain generation \(old.number)")
            }
        }
        return (chain, old)
    }

    /// Drops `built`, which will not serve: what it opened afresh is released.
    func discard(_ built: ChainGeneration) async {
        await release(built.carried.fresh())
    }

    /// Stops and closes objects no chain holds any more: stores in the store runner,
    /// background services in the background runner, anything else at once.
    private func release(_ items: [any Sendable]) async {
        for item in items {
            if let store = item as? RunningStore {
                storeRunner.release(store)
            } else if let service = item as? any CarriedService {
                background.release(service)
            } else {
                await (item as? any CarriedResource)?.close()
            }
        }
    }

    /// At the end, once the runners have stopped (closing their services and running
    /// stores): closes the rest of what the serving chain holds, stores last.
    func releaseAll() async {
        guard let generation = serving else { return }
        let resources = generation.carried.all.filter { !($0 is any CarriedService) }.compactMap { $0 as? any CarriedResource }
        for resource in resources where !(resource is CarriedStore) { await resource.close() }
        for resource in resources where resource is CarriedStore { await resource.close() }
    }
}

/// The background work of one chain generation (``BackgroundWork``): run by the instance's
/// background runner, each piece holding a lease on the generation, so that the generation
/// drains only once its requests and its work have all ended.
final class GenerationWork: BackgroundWork {
    private let runner: BackgroundRunner
    /// The generation, once it serves; work started before runs without a lease.
    private let serving = Mutex<ServingChain?>(nil)

    init(runner: BackgroundRunner) {
        self.runner = runner
    }

    /// The generation serves as `chain` from now on.
    func serve(_ chain: ServingChain) {
        serving.withLock { $0 = chain }
    }

    func start(_ work: @escaping @Sendable () async -> Void) {
        // Started by a handler answering a request, which holds a lease on the generation:
        // it cannot have drained, so another lease may be taken on it.
        let lease = serving.withLock { chain in chain.flatMap { $0.isDrained ? nil : GenerationLease(entering: $0).handOver() } }
        runner.run(work, then: { lease?.end() })
    }
}
