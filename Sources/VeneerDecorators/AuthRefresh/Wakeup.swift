import Synchronization
import VeneerCore

/// Wakes the token manager's background loop early: whenever the token or the refresh
/// state changes, so that the loop never sleeps through a change on an old schedule.
final class Wakeup: Sendable {
    private struct State {
        var pending = false
        var waiter: CheckedContinuation<Void, Never>?
    }
    private let state = Mutex(State())

    /// Wakes the loop now, or as soon as it next waits.
    func signal() {
        let waiter = state.withLock { state in
            guard let waiter = state.waiter else {
                state.pending = true
                return nil as CheckedContinuation<Void, Never>?
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    /// Returns when signalled (or a signal came since the last wait), when `clock`'s
    /// monotonic reading reaches `deadline`, or when the task is cancelled. A deadline, not a
    /// pause: the sleeping child task may start after the clock has moved.
    func wait(until deadline: Duration, clock: any VeneerClock) async {
        if state.withLock({ state in defer { state.pending = false }; return state.pending }) { return }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await clock.sleep(untilMonotonic: deadline) }
            group.addTask { await self.signalled() }
            _ = await group.next()
            group.cancelAll()
        }
    }

    private func signalled() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now: Bool = state.withLock { state in
                    if state.pending || Task.isCancelled {
                        state.pending = false
                        return true
                    }
                    state.waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
    }
}
