/// The one interface of Veneer: something that answers a proxied request.
///
/// Origins (the upstream, the mock) answer by themselves; decorators hold an `inner`
/// handler and add one concern around it. Errors are thrown as ``ProxyError`` (or anything
/// else, which the server edge reports as `internal`); only the edge turns them into HTTP.
public protocol Handler: Sendable {
    /// Answers one request.
    func handle(_ request: ProxyRequest) async throws -> ProxyResponse
}
