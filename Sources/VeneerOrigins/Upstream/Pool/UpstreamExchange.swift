import HTTPTypes
import NIOCore
import VeneerCore

/// One request on its way through a loop's pool: what to send, and who waits for the outcome.
///
/// `@unchecked Sendable`, the one such boundary of the pooled transport: an exchange is made
/// on the caller's thread and handed to its pool's event loop (by `execute`, which orders the
/// hand-off), and a cancel reaches it through the same loop; its mutable parts, `state` and a
/// resent request's trace, are read and written on that loop alone.
final class UpstreamExchange: @unchecked Sendable {
    /// Who waits: a task (``PooledHTTP1Transport/send(_:)``), or a callback
    /// (``PooledHTTP1Transport/start(_:then:)``), called on the loop.
    enum Waiter {
        case task(UnsafeContinuation<ProxyResponse, any Error>)
        case callback(@Sendable (Result<ProxyResponse, any Error>) -> Void)
    }

    /// Changed only by ``resend()``, on the loop.
    private(set) var request: OutboundRequest
    /// Its state as a request: waiting, answered, its bodies streaming either way. Touched
    /// on the loop only: by the pool, and by the connection handler running it.
    var state = UpstreamExchangeStateMachine<Waiter>()

    init(request: OutboundRequest) {
        self.request = request
    }

    /// On the loop: it goes again on another connection after its first closed before an
    /// answer: another attempt, with a `traceparent` of its own (``OutgoingTrace/resent()``).
    func resend() {
        if let trace = request.trace { request.trace = trace.resent() }
    }

    /// Writes the request into `buffer` (``OutboundRequest/writeHTTP1(into:)``), read in place
    /// through an inout access: read through the stored property for the call, it was copied
    /// whole first, each part retained and released (callgrind: about 550 instructions a request).
    func writeRequest(into buffer: inout ByteBuffer) {
        Self.write(&request, into: &buffer)
    }

    private static func write(_ request: inout OutboundRequest, into buffer: inout ByteBuffer) {
        request.writeHTTP1(into: &buffer)
    }

    /// Whether it may be sent twice (RFC 9110 §9.2.2).
    var isIdempotent: Bool {
        switch request.method {
        case .get, .head, .put, .delete, .options, .trace: true
        default: false
        }
    }

    /// On the loop: whether to submit it to the pool (else it was cancelled on the way and
    /// its waiter has been told).
    func start(_ waiter: Waiter) -> Bool {
        switch state.start(waiter, streamsBody: request.bodyStream != nil) {
        case .submit:
            return true
        case .failCancelled(let waiter):
            Self.fail(waiter, UpstreamFailure.cancelled.error(for: request).neverSent)
            return false
        }
    }

    /// On the loop: whether the pool must be told (it holds the exchange).
    func cancel() -> Bool {
        state.cancel() == .cancelInPool
    }

    /// On the loop: gives the waiter its answer (the first time only); an answer whose body
    /// streams keeps the exchange going until that body ends.
    func finish(_ response: consuming ProxyResponse) {
        // Read in place and handed on, not copied: a copy retains and releases each part.
        guard let waiter = state.finish(streamed: response.stream != nil) else { return }
        switch waiter {
        case .callback(let done): done(.success(response))
        case .task(let continuation): continuation.resume(returning: response)
        }
    }

    /// On the loop: fails the waiter with `failure`, marked ``ProxyError/requestNeverSent``
    /// when the pool says no byte of it can have been written.
    func fail(_ failure: UpstreamFailure, neverSent: Bool) {
        guard let waiter = state.finish() else { return }
        let error = failure.error(for: request)
        Self.fail(waiter, neverSent ? error.neverSent : error)
    }

    private static func fail(_ waiter: Waiter, _ error: ProxyError) {
        switch waiter {
        case .callback(let done): done(.failure(error))
        case .task(let continuation): continuation.resume(throwing: error)
        }
    }
}
