/// A handler that needs each request's body whole (``ProxyRequest/body``): `record` writes it,
/// the mock origin parses it. A chain with one reads every request body whole, up to
/// `limits.request_body`, even on a resource declared `body: stream`.
public protocol ReadsRequestBodies: Handler {}

/// A handler that may have the answer without waiting for anything (a fresh cache hit).
///
/// ``answerImmediately(_:)`` gives either the answer or the rest of the work, which carries
/// along what was already worked out (the cache's key and lookup), so that a request that
/// must wait does not start over. ``handle(_:)`` is derived from it: both forms give the
/// same answer with the same effects by construction.
///
/// A decorator that adopts it asks its inner handler the same way when that one adopts it
/// too, and otherwise answers `.later { try await inner.handle(request) }`.
public protocol ImmediateAnswering: Handler {
    /// The answer, or the work that will give it.
    func answerImmediately(_ request: ProxyRequest) -> ImmediateAnswer

    /// Whether this handler itself can give an answer without waiting (the cache), rather
    /// than only pass on its inner handler's: a chain is worth asking for an immediate answer
    /// only if one handler can give one.
    var answersImmediately: Bool { get }
}

extension ImmediateAnswering {
    /// The immediate answer, or the rest of the work awaited.
    public func handle(_ request: ProxyRequest) async throws -> ProxyResponse {
        switch answerImmediately(request) {
        case .answer(let response): return response
        case .later(let rest): return try await rest()
        }
    }
}

/// What ``ImmediateAnswering/answerImmediately(_:)`` gives.
public enum ImmediateAnswer: Sendable {
    /// The answer, now.
    case answer(ProxyResponse)
    /// The answer needs waiting for: the rest of the work.
    case later(Deferred)
}

/// The rest of the work of an answer that needs waiting for, with what was already worked
/// out captured in it. Run it once.
public struct Deferred: Sendable {
    private let work: @Sendable () async throws -> ProxyResponse

    /// The rest of the work.
    public init(_ work: @escaping @Sendable () async throws -> ProxyResponse) {
        self.work = work
    }

    /// Does the rest of the work.
    public func callAsFunction() async throws -> ProxyResponse {
        try await work()
    }
}

/// A handler that can start answering without a Swift task and call back on the event loop
/// it was asked on (the upstream origin over Veneer's pooled HTTP/1.1 transport).
///
/// A decorator that adopts it passes the start on to its inner handler (wrapping `done`),
/// which therefore adopts it too; ``startsWithoutTask`` says whether the chain below can.
public protocol CallbackAnswering: Handler {
    /// Whether ``startAnswer(_:then:)`` can ever start (the upstream: a plain `http://` peer on
    /// the pooled transport; `https://` goes through a client that needs a task), so that a
    /// chain whose requests would all be declined is never asked.
    var startsWithoutTask: Bool { get }

    /// Starts answering `request`: `done` gets what ``handle(_:)`` would give (the answer or
    /// the error), with the same effects, exactly once, on the event loop this was called on,
    /// possibly before this returns; the result is true. False means that nothing was started
    /// and nothing happened (called off the transport's event loops, say): use ``handle(_:)``.
    func startAnswer(_ request: ProxyRequest, then done: @escaping @Sendable (Result<ProxyResponse, any Error>) -> Void) -> Bool
}
