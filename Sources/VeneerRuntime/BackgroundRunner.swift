import Logging
import ServiceLifecycle
import Synchronization
import VeneerCore
import VeneerServer

/// Runs the background loops of carried state (cache purges, token refreshes) as child
/// tasks of one service: a loop starts when a chain first takes its object, stops when no
/// chain holds it any more, and every loop stops at graceful shutdown. It also runs what
/// waits for a retired chain generation to drain (``whenDrained(_:then:)``), and the chains'
/// background work (``run(_:then:)``: a cache's refresh).
final class BackgroundRunner: Service, Sendable, CustomStringConvertible {
    private enum Command: Sendable {
        case start(any CarriedService, Latch)
        case afterDrain(ServingChain, @Sendable () async -> Void)
        case work(@Sendable () async -> Void, then: @Sendable () -> Void)
    }

    private let started = Mutex<[ObjectIdentifier: Latch]>([:])
    /// Fired at graceful shutdown: nobody waits for old generations any longer.
    private let shuttingDown = Latch()
    private let commands: AsyncStream<Command>
    private let continuation: AsyncStream<Command>.Continuation
    let logger: Logger
    /// What it runs, in words: what the service group's log lines call it.
    let description: String

    init(logger: Logger, description: String = "the background loops of the decorators") {
        (commands, continuation) = AsyncStream.makeStream()
        self.logger = logger
        self.description = description
    }

    /// Starts the loops of the services among `objects` that are not running yet.
    func adopt(_ objects: [any Sendable]) {
        for case let service as any CarriedService in objects {
            let id = ObjectIdentifier(service as AnyObject)
            let signal: Latch? = started.withLock { started in
                guard started[id] == nil else { return nil }
                let signal = Latch()
                started[id] = signal
                return signal
            }
            if let signal { continuation.yield(.start(service, signal)) }
        }
    }

    /// Runs `work` once `generation` (retired) has drained, or at graceful shutdown,
    /// whichever comes first.
    func whenDrained(_ generation: ServingChain, then work: @escaping @Sendable () async -> Void) {
        continuation.yield(.afterDrain(generation, work))
    }

    /// Runs `work`, then `done` (at once, without the work, once the runner has stopped).
    func run(_ work: @escaping @Sendable () async -> Void, then done: @escaping @Sendable () -> Void) {
        if case .terminated = continuation.yield(.work(work, then: done)) { done() }
    }

    /// Stops the loop of `service` (and closes it) once it is no longer held.
    func release(_ service: any CarriedService) {
        let id = ObjectIdentifier(service as AnyObject)
        started.withLock { $0.removeValue(forKey: id) }?.open()
    }

    func run() async throws {
        await withDiscardingTaskGroup { group in
            for await command in commands.cancelOnGracefulShutdown() {
                switch command {
                case .start(let service, let signal):
                    group.addTask {
                        await withTaskGroup(of: Void.self) { loop in
                            loop.addTask { await service.run() }
                            loop.addTask { await signal.wait() }
                            _ = await loop.next()
                            loop.cancelAll()
                        }
                        await service.close()
                    }
                case .afterDrain(let generation, let work):
                    group.addTask { [shuttingDown] in
                        await withTaskGroup(of: Void.self) { race in
                            race.addTask { await generation.drained() }
                            race.addTask { await shuttingDown.wait() }
                            _ = await race.next()
                            race.cancelAll()
                        }
                        await work()
                    }
                case .work(let work, let done):
                    group.addTask {
                        await work()
                        done()
                    }
                }
            }
            // Graceful shutdown: stop every loop; each closes its object on the way out.
            // Work asked for from now on is not run (nothing that started it still runs).
            continuation.finish()
            shuttingDown.open()
            for signal in started.withLock({ Array($0.values) }) { signal.open() }
        }
    }
}
