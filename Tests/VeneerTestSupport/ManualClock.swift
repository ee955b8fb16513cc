import Foundation
import Synchronization
import VeneerCore

/// A clock that moves only when told to: ``advance(by:)`` moves both readings and wakes
/// the sleepers whose time has come.
public final class ManualClock: VeneerClock {
    private struct State {
        var now: Date
        var elapsed: Duration = .zero
        var sleepers: [(id: UInt64, deadline: Duration, continuation: CheckedContinuation<Void, Never>)] = []
        var nextID: UInt64 = 0
    }
    private let state: Mutex<State>

    /// A manual clock that starts at `start`.
    public init(start: Date = Date(timeIntervalSince1970: 1_800_000_000)) {
        state = Mutex(State(now: start))
    }

    /// The clock's wall-clock time.
    public func now() -> Date { state.withLock { $0.now } }
    /// Time advanced so far.
    public func monotonic() -> Duration { state.withLock { $0.elapsed } }

    /// Suspends until the clock has been advanced by `duration`, or the task is cancelled
    /// (then it throws `CancellationError`, like `Task.sleep`).
    public func sleep(for duration: Duration) async throws {
        try await sleep(.after(duration))
    }

    /// Suspends until the clock's ``monotonic()`` reading has reached `deadline`, counted
    /// from the clock's start however late the sleep begins, or the task is cancelled.
    public func sleep(untilMonotonic deadline: Duration) async throws {
        try await sleep(.at(deadline))
    }

    private enum Wake {
        case after(Duration)
        case at(Duration)
    }

    private func sleep(_ wake: Wake) async throws {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready: Bool = state.withLock { state in
                    let deadline: Duration
                    switch wake {
                    case .after(let duration): deadline = state.elapsed + duration
                    case .at(let instant): deadline = instant
                    }
                    if deadline <= state.elapsed || Task.isCancelled { return true }
                    state.sleepers.append((id, deadline, continuation))
                    return false
                }
                if ready { continuation.resume() }
            }
        } onCancel: {
            let sleeper = state.withLock { state in
                let index = state.sleepers.firstIndex { $0.id == id }
                return index.map { state.sleepers.remove(at: $0) }
            }
            sleeper?.continuation.resume()
        }
        try Task.checkCancellation()
    }

    /// The number of tasks sleeping on this clock.
    public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    /// Moves time forward and wakes the sleepers that are due.
    public func advance(by duration: Duration) {
        let due = state.withLock { state in
            state.elapsed += duration
            state.now += TimeInterval(duration.seconds)
            let due = state.sleepers.filter { $0.deadline <= state.elapsed }
            state.sleepers.removeAll { $0.deadline <= state.elapsed }
            return due
        }
        for sleeper in due { sleeper.continuation.resume() }
    }
}
