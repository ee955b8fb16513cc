import NIOCore
import Synchronization
import VeneerCore

/// A request's ``BodyStream`` as the `AsyncSequence` of parts AsyncHTTPClient's
/// `HTTPClientRequest.Body.stream(_:length:)` pulls: one ``BodyStream/read()`` per `next()`,
/// so the client's socket is read only as AsyncHTTPClient writes what came before (its own
/// backpressure: it asks for the next part once the last one was written).
///
/// A cut body (its client left or paused too long) throws its ``ProxyError``, which fails the
/// request and closes its connection. An iterator dropped before the end (AsyncHTTPClient
/// stopped sending: the upstream answered early, or the request failed), or whose task is
/// cancelled, cancels the stream, so its client hears that the rest is not wanted.
struct BodyStreamParts: AsyncSequence, Sendable {
    typealias Element = ByteBuffer

    let stream: BodyStream

    func makeAsyncIterator() -> Iterator {
        Iterator(reader: Reader(stream))
    }

    struct Iterator: AsyncIteratorProtocol {
        let reader: Reader

        mutating func next() async throws -> ByteBuffer? {
            try await reader.next()
        }
    }

    /// The consumer side of the stream: at most one part asked for at a time.
    final class Reader: Sendable {
        private struct State {
            var started = false
            /// An event that came while nobody waited (cannot happen with one read per
            /// `next()`, but a cut may come at any time).
            var pending: BodyStream.Event?
            var waiting: CheckedContinuation<BodyStream.Event, Never>?
            var over = false
        }

        private let stream: BodyStream
        private let state = Mutex(State())

        init(_ stream: BodyStream) {
            self.stream = stream
        }

        deinit {
            // Dropped before the end: nobody will send the rest.
            if !state.withLock({ $0.over }) { stream.cancel() }
        }

        func next() async throws -> ByteBuffer? {
            if state.withLock({ $0.over }) { return nil }
            let event = await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<BodyStream.Event, Never>) in
                    let (start, ready) = state.withLock { state -> (Bool, BodyStream.Event?) in
                        if let pending = state.pending {
                            state.pending = nil
                            return (false, pending)
                        }
                        if state.over {
                            // Cancelled on the way in.
                            return (false, .failed(.upstreamUnavailable("The request to the upstream was cancelled.")))
                        }
                        state.waiting = continuation
                        defer { state.started = true }
                        return (!state.started, nil)
                    }
                    if let ready {
                        continuation.resume(returning: ready)
                        return
                    }
                    if start { stream.start { [self] event in self.arrived(event) } }
                    stream.read()
                }
            } onCancel: {
                cancel()
            }
            switch event {
            case .part(let part):
                return part
            case .end:
                state.withLock { $0.over = true }
                return nil
            case .failed(let error):
                state.withLock { $0.over = true }
                throw error
            }
        }

        /// The task sending the body was cancelled: the stream is cancelled (its consumer then
        /// hears nothing more), so a part waited for is answered here.
        private func cancel() {
            let waiting = state.withLock { state in
                state.over = true
                defer { state.waiting = nil }
                return state.waiting
            }
            stream.cancel()
            waiting?.resume(returning: .failed(.upstreamUnavailable("The request to the upstream was cancelled.")))
        }

        private func arrived(_ event: BodyStream.Event) {
            let waiting = state.withLock { state -> CheckedContinuation<BodyStream.Event, Never>? in
                guard let waiting = state.waiting else {
                    state.pending = event
                    return nil
                }
                state.waiting = nil
                return waiting
            }
            waiting?.resume(returning: event)
        }
    }
}
