import NIOCore

/// A response body that arrives part by part instead of whole (``ProxyResponse/stream``): an
/// upstream answer of unknown length (chunked, close-delimited, server-sent events) or one
/// longer than the origin's streaming threshold.
///
/// It is pulled, one part at a time, the way a NIO channel with `autoRead` off is read (and
/// AsyncHTTPClient's `demandMoreResponseBodyParts`): its consumer (the connection writing the
/// answer) calls ``read()`` when it can take a part, and the producer (the upstream connection)
/// reads its socket only while a part is wanted. A client that does not read therefore stops
/// the upstream's socket being read, and its receive window fills: what the stream holds is at
/// most what one read of the socket brought.
///
/// Everything happens on ``eventLoop`` (the upstream connection's, usually the client
/// connection's too): calls from elsewhere hop there, and a consumer on another loop gets its
/// events on ``eventLoop`` and hops itself.
///
/// Decorators that need the bytes say so: ``collect(upTo:)`` gathers the whole body (the
/// buffered limit applies), ``tap(_:)`` sees each part as it passes (a copy kept while it is
/// small enough, say) without delaying or changing it.
public final class BodyStream: @unchecked Sendable {
    /// What a consumer or a tap sees.
    public enum Event: Sendable {
        /// The next part of the body.
        case part(ByteBuffer)
        /// The body ended whole.
        case end
        /// The body was cut: the upstream failed or went quiet for too long, or the consumer left.
        case failed(ProxyError)
    }

    /// Where a stream's bytes come from (the upstream connection), told when to read and when
    /// to give up.
    package protocol Source: AnyObject {
        /// A consumer started reading the body (``start(_:)``).
        func bodyStarted()
        /// A part is wanted and none is held: read the socket.
        func bodyDemanded()
        /// Nobody wants the rest: stop, and never reuse what carried it.
        func bodyCancelled()
    }

    /// The loop everything happens on.
    public let eventLoop: any EventLoop
    /// The body's length when the upstream declared it (`Content-Length`), else nil.
    public let expectedLength: Int?

    // Confined to `eventLoop` (hence `@unchecked Sendable`).
    private weak var source: (any Source)?
    private var held = CircularBuffer<ByteBuffer>(initialCapacity: 2)
    private var ending: Event?
    private var consumer: (@Sendable (Event) -> Void)?
    private var taps: [@Sendable (Event) -> Void] = []
    private var wanted = false
    private var finished = false
    private var started = false

    /// A stream fed by `source` on `eventLoop`.
    package init(eventLoop: any EventLoop, expectedLength: Int?, source: (any Source)?) {
        self.eventLoop = eventLoop
        self.expectedLength = expectedLength
        self.source = source
    }

    /// A stream of parts known already, for tests and for origins that hold a body in pieces.
    public static func of(_ parts: [ByteBuffer], on eventLoop: any EventLoop) -> BodyStream {
        let stream = BodyStream(eventLoop: eventLoop, expectedLength: parts.reduce(0) { $0 + $1.readableBytes }, source: nil)
        stream.onLoop {
            for part in parts { _ = stream.yield(part) }
            stream.finish(nil)
        }
        return stream
    }

    // MARK: Producer

    /// The producer has the next part; whether it should read on (a part is still wanted).
    package func yield(_ part: ByteBuffer) -> Bool {
        eventLoop.preconditionInEventLoop()
        guard !finished, ending == nil else { return false }
        if wanted, held.isEmpty {
            wanted = false
            deliver(.part(part))
        } else {
            held.append(part)
        }
        return wanted
    }

    /// The producer is done: the body ended (nil) or was cut (the error).
    package func finish(_ error: ProxyError?) {
        eventLoop.preconditionInEventLoop()
        guard !finished, ending == nil else { return }
        ending = error.map { .failed($0) } ?? .end
        if held.isEmpty, consumer != nil { deliverEnding() }
    }

    /// Whether a part is wanted and none is held: the producer should read.
    package var wantsPart: Bool { wanted && held.isEmpty && ending == nil && !finished }

    // MARK: Consumer

    /// Taps see every event the consumer sees, in order, before it does. Add them before the
    /// consumer starts (a decorator does, before it returns the response).
    public func tap(_ observer: @escaping @Sendable (Event) -> Void) {
        onLoop {
            precondition(!self.started, "a body's taps are added before it is read")
            self.taps.append(observer)
        }
    }

    /// Starts consuming: `consumer` gets each part asked for with ``read()``, then `.end` or
    /// `.failed`, on ``eventLoop``. Once only.
    package func start(_ consumer: @escaping @Sendable (Event) -> Void) {
        onLoop {
            precondition(!self.started, "a body is read once")
            self.started = true
            self.consumer = consumer
            self.source?.bodyStarted()
        }
    }

    /// The consumer can take one more part.
    public func read() {
        onLoop {
            guard self.consumer != nil, !self.finished else { return }
            if let part = self.held.popFirst() {
                self.deliver(.part(part))
                if self.held.isEmpty, self.ending != nil { self.deliverEnding() }
                return
            }
            if self.ending != nil {
                self.deliverEnding()
                return
            }
            guard !self.wanted else { return }
            self.wanted = true
            self.source?.bodyDemanded()
        }
    }

    /// The consumer leaves: the producer stops (its connection is not reused) and the taps
    /// hear that the body was cut.
    public func cancel() {
        onLoop {
            guard !self.finished else { return }
            self.finished = true
            self.held.removeAll()
            let cut = Event.failed(.upstreamUnavailable("The client left before the answer's end."))
            for tap in self.taps { tap(cut) }
            self.taps = []
            self.consumer = nil
            if self.ending == nil { self.source?.bodyCancelled() }
            self.source = nil
        }
    }

    /// The whole body, read into one buffer; more than `limit` bytes cancels the stream and
    /// throws `upstream_unavailable` (a 502, as a buffered answer over `response_body` gets).
    /// What is read is reserved from `budget` (`limits.buffered`) as it comes, waiting briefly
    /// for room (``BufferBudget/wait``); beyond the budget, 503 `overloaded`. The reservation
    /// is given back when this returns: ``collected(upTo:budget:)`` keeps it with the body.
    public func collect(upTo limit: Int, budget: BufferBudget? = nil) async throws -> ByteBuffer {
        try await collected(upTo: limit, budget: budget).body
    }

    /// ``collect(upTo:budget:)``, with the reservation that holds the body's share of `budget`.
    func collected(upTo limit: Int, budget: BufferBudget?) async throws -> (body: ByteBuffer, reservation: BufferBudget.Reservation?) {
        if let expectedLength, expectedLength > limit {
            cancel()
            throw Self.tooLarge(limit)
        }
        let reservation = budget?.reserve(0)
        let body = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<ByteBuffer, any Error>) in
            let gathered = Gathered(continuation)
            let eventLoop = eventLoop
            start { [self] event in
                switch event {
                case .part(let part):
                    guard gathered.value.readableBytes + part.readableBytes <= limit else {
                        cancel()
                        gathered.resume(throwing: Self.tooLarge(limit))
                        return
                    }
                    guard let reservation else {
                        gathered.append(part)
                        read()
                        return
                    }
                    // The stream may deliver its end before this part's room is granted
                    // (a stream that holds its last parts ends without another read).
                    gathered.growing = true
                    reservation.grow(by: part.readableBytes, waitingOn: eventLoop) { [self] reserved in
                        gathered.growing = false
                        guard reserved else {
                            cancel()
                            gathered.resume(throwing: Self.overloaded)
                            return
                        }
                        gathered.append(part)
                        if gathered.ended { gathered.resume() } else { read() }
                    }
                case .end:
                    gathered.ended = true
                    if !gathered.growing { gathered.resume() }
                case .failed(let error):
                    gathered.resume(throwing: error)
                }
            }
            read()
        }
        return (body, reservation)
    }

    /// 503 `overloaded`: what cannot be buffered within `limits.buffered`, even after a wait.
    public static var overloaded: ProxyError {
        var error = ProxyError(.overloaded, "Veneer is holding as many bodies as limits.buffered allows; try again shortly.")
        error.headers[.retryAfter] = "1"
        return error
    }

    /// The bytes gathered so far by ``collect(upTo:)``, and its continuation, resumed once
    /// (touched on the stream's loop only).
    private final class Gathered: @unchecked Sendable {
        var value = ByteBuffer()
        /// A part waits for its room in the budget.
        var growing = false
        /// The stream ended (the body is whole once no part waits for room).
        var ended = false
        private var continuation: CheckedContinuation<ByteBuffer, any Error>?

        init(_ continuation: CheckedContinuation<ByteBuffer, any Error>) {
            self.continuation = continuation
        }

        func append(_ part: ByteBuffer) {
            if value.readableBytes == 0 {
                value = part
            } else {
                var part = part
                value.writeBuffer(&part)
            }
        }

        func resume() {
            continuation?.resume(returning: value)
            continuation = nil
        }

        func resume(throwing error: any Error) {
            continuation?.resume(throwing: error)
            continuation = nil
        }
    }

    static func tooLarge(_ limit: Int) -> ProxyError {
        .upstreamUnavailable("The upstream's response is larger than allowed.",
                             detail: "the response is larger than \(limit) bytes (limits.response_body) and had to be buffered")
    }

    // MARK: Delivery

    private func deliver(_ event: Event) {
        for tap in taps { tap(event) }
        consumer?(event)
    }

    private func deliverEnding() {
        guard let ending, !finished else { return }
        finished = true
        let consumer = self.consumer
        for tap in taps { tap(ending) }
        taps = []
        self.consumer = nil
        source = nil
        consumer?(ending)
    }

    private func onLoop(_ body: @escaping @Sendable () -> Void) {
        if eventLoop.inEventLoop { body() } else { eventLoop.execute(body) }
    }
}
