/// How the server answers the requests of one built chain, worked out once per chain
/// (``init(outermostFirst:)``) from the capabilities its handlers adopt, so that each request
/// takes one path without asking the chain twice.
public enum ChainPlan: Sendable {
    /// Ask the outermost handler for an answer without waiting; run the rest of the work in a
    /// task when there is any. The chain starts with handlers that adopt
    /// ``ImmediateAnswering``, one of which can answer by itself (the cache).
    case immediate(any ImmediateAnswering)
    /// Start the answer by callback on the connection's event loop (a task only if that is
    /// declined). Every handler of the chain adopts ``CallbackAnswering`` and the origin can
    /// start without a task.
    case callback(any CallbackAnswering)
    /// Answer in a task.
    case task(any Handler)

    /// The plan for the handlers of a chain, outermost first (the last is the origin; each
    /// other one wraps the next).
    public init(outermostFirst handlers: [any Handler]) {
        guard let outermost = handlers.first else { preconditionFailure("a chain has an origin at least") }
        // The run of immediate-answering handlers from the outside: one of them must be able
        // to answer by itself, or every request would go on to the task anyway.
        let immediateRun = handlers.prefix { $0 is any ImmediateAnswering }.compactMap { $0 as? any ImmediateAnswering }
        if let first = outermost as? any ImmediateAnswering, immediateRun.contains(where: \.answersImmediately) {
            self = .immediate(first)
            return
        }
        let callbacks = handlers.compactMap { $0 as? any CallbackAnswering }
        if callbacks.count == handlers.count, callbacks.allSatisfy(\.startsWithoutTask), let first = outermost as? any CallbackAnswering {
            self = .callback(first)
            return
        }
        self = .task(outermost)
    }

    /// The outermost handler.
    public var handler: any Handler {
        switch self {
        case .immediate(let handler): return handler
        case .callback(let handler): return handler
        case .task(let handler): return handler
        }
    }
}
