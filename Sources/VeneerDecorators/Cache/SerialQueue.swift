import Synchronization

/// Runs async operations one after another in the order they were enqueued, so that a
/// store sees "put, then delete" in that order even when nobody waits for the put.
final class SerialQueue: Sendable {
    private let tail = Mutex<Task<Void, Never>?>(nil)

    /// Enqueues `operation` without waiting for it.
    func enqueue(_ operation: @escaping @Sendable () async -> Void) {
        tail.withLock { tail in
            let previous = tail
            tail = Task {
                await previous?.value
                await operation()
            }
        }
    }

    /// Enqueues `operation` and waits for its result.
    func run<T: Sendable>(_ operation: @escaping @Sendable () async -> T) async -> T {
        await withCheckedContinuation { continuation in
            enqueue { continuation.resume(returning: await operation()) }
        }
    }

    /// Waits until everything enqueued so far has run.
    func drain() async {
        await run {}
    }
}
