/// The one interface of Veneer: something that answers a proxied request.
///
/// Origins (the upstream, the mock) answer by themselves; decorators hold an `inner`
/// handler and add one concern around it. Errors are thrown as ``ProxyError`` (or anything
/// else, which the server edge reports as `internal`); only the edge turns them into HTTP.
public protocol Handler: Sendable {
    /// Answers one request.
    func handle(_ request: ProxyRequest) async throws -> ProxyResponse

    /// The answer to `request` if this handler has it without waiting for anything (a fresh
    /// cache hit), else nil, and then the server calls ``handle(_:)``. Non-nil means the
    /// very answer ``handle(_:)`` would give, with the same effects (counters, logs): the
    /// server writes it without starting a task. A decorator that implements it asks its
    /// inner handler; one that does not answers nil, which is always correct.
    func answerAtOnce(_ request: ProxyRequest) -> ProxyResponse?

    /// Starts answering `request` without a task, if this handler can all the way down (the
    /// upstream origin over the pooled transport, on one of its event loops): it then calls
    /// `done` exactly once, on that loop, with what ``handle(_:)`` would give (the answer or
    /// the error), with the same effects, and returns true. `done` may run before this
    /// returns. False means nothing was started, and the server calls ``handle(_:)``. A
    /// decorator that implements it passes it on to its inner handler, wrapping `done`; one
    /// that does not answers false, which is always correct.
    func startAnswer(_ request: ProxyRequest, then done: @escaping @Sendable (Result<ProxyResponse, any Error>) -> Void) -> Bool
}

extension Handler {
    /// Nothing at once: every request goes through ``handle(_:)``.
    public func answerAtOnce(_ request: ProxyRequest) -> ProxyResponse? { nil }

    /// Nothing without a task: every request goes through ``handle(_:)``.
    public func startAnswer(_ request: ProxyRequest, then done: @escaping @Sendable (Result<ProxyResponse, any Error>) -> Void) -> Bool {
        false
    }
}
