import Synchronization
import VeneerCore

/// The callers waiting for one refresh. The refresh runs on its own (see
/// ``TokenManager``); a caller stops waiting at its timeout or when cancelled, and the
/// refresh goes on without it.
final class RefreshFlight: Sendable {
    /// How a wait ended.
    enum Wait: Sendable {
        case done(Result<AccessToken, ProxyError>)
        case timedOut
        case cancelled
    }

    private struct State {
        var outcome: Result<AccessToken, ProxyError>?
        var waiters: [UInt64: CheckedContinuation<Result<AccessToken, ProxyError>?, Never>] = [:]
        var cancelled: Set<UInt64> = []
        var nextID: UInt64 = 0
    }
    private let state = Mutex(State())

    /// Whether the refresh is over.
    var isFinished: Bool { state.withLock { $0.outcome != nil } }

    /// Ends the refresh: every waiter gets `outcome` (the first call only).
    func finish(_ outcome: Result<AccessToken, ProxyError>) {
        let waiters = state.withLock { state -> [CheckedContinuation<Result<AccessToken, ProxyError>?, Never>] in
            guard state.outcome == nil else { return [] }
            state.outcome = outcome
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: outcome) }
    }

    /// Waits for the outcome, at most `timeout` (real time: it bounds a network exchange).
    func wait(timeout: Duration) async -> Wait {
        await withTaskGroup(of: Wait.self) { group in
            group.addTask { await self.outcome().map(Wait.done) ?? .cancelled }
            group.addTask {
                do {
                    try await Task.sleep(for: timeout)
                    return .timedOut
                } catch {
                    return .cancelled
                }
            }
            let first = await group.next() ?? .cancelled
            group.cancelAll()
            return first
        }
    }

    /// The outcome; nil when the waiting task is cancelled first.
    func outcome() async -> Result<AccessToken, ProxyError>? {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<AccessToken, ProxyError>?, Never>) in
                let ready: Result<AccessToken, ProxyError>?? = state.withLock { state in
                    if let outcome = state.outcome { return .some(outcome) }
                    if state.cancelled.remove(id) != nil { return .some(nil) }
                    state.waiters[id] = continuation
                    return .none
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Result<AccessToken, ProxyError>?, Never>? in
                if let waiter = state.waiters.removeValue(forKey: id) { return waiter }
                // Not registered yet: the registration sees this and returns at once.
                if state.outcome == nil { state.cancelled.insert(id) }
                return nil
            }
            waiter?.resume(returning: nil)
        }
    }
}
