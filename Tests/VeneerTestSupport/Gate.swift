import Synchronization

/// A one-shot gate: ``wait()`` suspends until ``open()`` (at once after it). Tests hold a
/// handler or a factory at a point with it instead of sleeping.
public final class Gate: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    /// A closed gate.
    public init() {}

    /// Opens it: every waiter goes on, and later ones do not wait.
    public func open() {
        let waiters = state.withLock { state in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Suspends until the gate is open.
    public func wait() async {
        await withCheckedContinuation { continuation in
            let open = state.withLock { state in
                if state.open { return true }
                state.waiters.append(continuation)
                return false
            }
            if open { continuation.resume() }
        }
    }
}

/// Events a test waits for, in order, without polling (a handler reached, a build begun).
public final class Signals<Event: Sendable>: Sendable {
    private let stream: AsyncStream<Event>
    private let continuation: AsyncStream<Event>.Continuation

    /// No events yet.
    public init() {
        (stream, continuation) = AsyncStream.makeStream()
    }

    /// Records an event.
    public func send(_ event: Event) { continuation.yield(event) }

    /// The next event, once it came (one waiter at a time: the events are a queue).
    public func next() async -> Event? {
        var iterator = stream.makeAsyncIterator()
        return await iterator.next()
    }
}
