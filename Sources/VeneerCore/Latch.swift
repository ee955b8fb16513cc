import Synchronization

/// A one-way signal: ``wait()`` suspends until ``open()``, and returns at once after it.
/// What the lifecycle waits on instead of polling: a generation drained, a store's first
/// connection settled, a background loop told to stop.
public final class Latch: Sendable {
    private struct State {
        var open = false
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var next: UInt64 = 0
    }
    private let state = Mutex(State())

    /// A closed latch.
    public init() {}

    /// Whether it was opened.
    public var isOpen: Bool { state.withLock { $0.open } }

    /// Opens it: every waiter goes on. Later calls change nothing.
    public func open() {
        let waiters = state.withLock { state in
            state.open = true
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once it is open, or when the calling task is cancelled.
    public func wait() async {
        let id: UInt64? = state.withLock { state in
            guard !state.open else { return nil }
            state.next += 1
            return state.next
        }
        guard let id else { return }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = state.withLock { state in
                    guard !state.open, !Task.isCancelled else { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if ready { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }
}
