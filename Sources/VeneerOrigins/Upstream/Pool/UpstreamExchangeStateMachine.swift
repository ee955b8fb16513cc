/// One request's life seen from its caller, as a value: made (possibly on another thread),
/// handed to its pool's event loop, finished. Where it is inside the pool (queued, on a
/// connection being opened, running on one) is ``UpstreamPoolStateMachine``'s to know.
///
/// The waiter (a task's continuation, or a callback) lives only in ``State/submitted(_:)``:
/// ``finish()`` hands it out once and leaves ``State/finished``, so a caller cannot be
/// resumed twice, whatever arrives late (a timeout, a cancel, a close).
struct UpstreamExchangeStateMachine<Waiter> {
    enum State {
        /// Made, not yet on the pool's loop.
        case created
        /// The caller's task was cancelled before the request reached the loop.
        case cancelled
        /// In the pool; `Waiter` waits for the outcome.
        case submitted(Waiter)
        /// The waiter has its outcome.
        case finished
    }

    /// What to do once the request is on the loop.
    enum StartAction {
        /// Give it to the pool.
        case submit
        /// It was cancelled on the way: fail `Waiter` at once.
        case failCancelled(Waiter)
    }

    /// What a cancel asks for.
    enum CancelAction: Equatable {
        /// Nothing (not on the loop yet, or already finished).
        case none
        /// Take it out of the pool.
        case cancelInPool
    }

    private(set) var state = State.created

    /// The request reaches its pool's loop, with who waits for it.
    mutating func start(_ waiter: Waiter) -> StartAction {
        switch state {
        case .created:
            state = .submitted(waiter)
            return .submit
        case .cancelled:
            state = .finished
            return .failCancelled(waiter)
        case .submitted, .finished:
            preconditionFailure("An upstream request is started once.")
        }
    }

    /// The caller's task was cancelled.
    mutating func cancel() -> CancelAction {
        switch state {
        case .created:
            state = .cancelled
            return .none
        case .submitted:
            return .cancelInPool
        case .cancelled, .finished:
            return .none
        }
    }

    /// The outcome is known: the waiter to give it to, the first time only.
    mutating func finish() -> Waiter? {
        guard case .submitted(let waiter) = state else { return nil }
        state = .finished
        return waiter
    }
}
