/// The one interface of Veneer: something that answers a proxied request.
///
/// Origins (the upstream, the mock) answer by themselves; decorators hold an `inner`
/// handler and add one concern around it. Errors are thrown as ``ProxyError`` (or anything
/// else, which the server edge reports as `internal`); only the edge turns them into HTTP.
///
/// That is all a handler needs. Two capabilities let the server answer without a Swift task
/// where a whole chain allows it (``ImmediateAnswering``, ``CallbackAnswering``); a handler
/// that adopts neither is answered in a task, which is always correct.
public protocol Handler: Sendable {
    /// Answers one request.
    func handle(_ request: ProxyRequest) async throws -> ProxyResponse
}
