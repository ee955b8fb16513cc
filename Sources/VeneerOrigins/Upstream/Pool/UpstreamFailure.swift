import VeneerCore

/// Why a request to a plain-HTTP upstream failed, as the state machines decide it; made into
/// the caller's ``ProxyError`` (with the upstream's name) in one place, ``error(for:)``.
enum UpstreamFailure: Equatable, Sendable {
    /// The transport was shut down.
    case shuttingDown
    /// The caller's task was cancelled.
    case cancelled
    /// No connection could be established within the connect timeout.
    case connectTimedOut
    /// The connection was refused or failed.
    case unreachable
    /// The request's own deadline passed (waiting, connecting or awaiting the answer).
    case timedOut
    /// The connection closed before a byte of the response, and the request could not be retried.
    case closedWithoutAnswer
    /// The connection closed in the middle of a response.
    case closedMidResponse
    /// The connection failed (a reset, an error) in the middle of a response.
    case failedMidResponse
    /// The response was not valid HTTP/1.1 (the parser's reason).
    case malformed(String)
    /// The response was over the size limit (the parser's reason).
    case tooLarge(String)
    /// The request's streamed body was cut before its end (its client left or paused too long).
    case requestBodyCut
    /// The upstream took nothing of the request's streamed body for `body_timeout` (it stopped reading).
    case requestBodyTimedOut

    /// `upstream_timeout` for the timeouts, `upstream_unavailable` for everything else: the
    /// message says what failed; the upstream's address and a parser's words are the detail,
    /// for the daemon log only.
    func error(for request: OutboundRequest) -> ProxyError {
        let target = request.endpoint.authority
        switch self {
        case .shuttingDown: return .upstreamUnavailable("Veneer is shutting down.")
        case .cancelled:
            return .upstreamUnavailable("The request to the upstream was cancelled.", detail: "the request to \(target) was cancelled")
        case .connectTimedOut:
            return .upstreamTimeout("Connecting to the upstream timed out.", detail: "connecting to \(target) timed out")
        case .unreachable: return .upstreamUnavailable("The upstream is unreachable.", detail: "\(target) is unreachable")
        case .timedOut:
            return .upstreamTimeout("The upstream did not answer in time.", detail: "\(target) did not answer within \(request.timeout)")
        case .closedWithoutAnswer:
            return .upstreamClosedWithoutAnswer(target)
        case .closedMidResponse:
            return .upstreamUnavailable("The upstream closed the connection mid-response.", detail: "\(target) closed the connection mid-response")
        case .failedMidResponse:
            return .upstreamUnavailable("The upstream failed mid-response.", detail: "\(target) failed mid-response")
        case .malformed(let reason):
            return .upstreamUnavailable("The upstream sent a malformed response.", detail: "\(target) sent a malformed response: \(reason)")
        case .tooLarge(let reason):
            return .upstreamUnavailable("The upstream's response is larger than allowed.", detail: "\(target): \(reason)")
        case .requestBodyCut:
            return .upstreamUnavailable("The request's body was cut before its end.", detail: "the body of a request to \(target) was cut")
        case .requestBodyTimedOut:
            return .upstreamTimeout("The upstream stopped taking the request's body.",
                                    detail: "\(target) took nothing of the request's body for limits.body_timeout")
        }
    }
}
