import HTTPTypes
import NIOCore
import Synchronization
import VeneerCore

/// An admin answer whose body goes on after its head: server-sent events (`GET /-/events`).
///
/// The edge writes the head without `Content-Length` and with `Connection: close` (the body
/// ends when the connection does, which HTTP/1.0 clients read too), then each chunk as it
/// comes. A client that does not read loses chunks instead of growing the output buffer:
/// a live feed is only worth its newest events. The edge takes each chunk as soon as it is
/// yielded (and drops it if need be), so a producer's buffer stays short; a bounded
/// `bufferingPolicy` (`.bufferingNewest(n)`) bounds it even for a loop that falls behind.
///
/// The access log line (and the request's count in the metrics) of a streamed answer is
/// written once it ends, with every byte written by then; it leaves the in-flight gauge as
/// its head goes out.
public struct AdminStream: Sendable {
    /// Status and headers (`Content-Type: text/event-stream`, `Cache-Control: no-store`), and the first bytes of the body (may be empty).
    public var head: ProxyResponse
    /// The rest of the body, chunk by chunk; the answer ends when it finishes. The edge stops iterating (which terminates the stream, so its onTermination runs) when the client leaves or the server shuts down.
    public var chunks: AsyncStream<ByteBuffer>

    /// A streamed answer: `head` now, `chunks` as they come.
    public init(head: ProxyResponse, chunks: AsyncStream<ByteBuffer>) {
        self.head = head
        self.chunks = chunks
    }

    /// How many streams an edge writes at once; the next is answered 503. A status page left
    /// open in many tabs holds a connection (and a subscription to its feed) each: this bounds
    /// them. Browsers open at most 6 connections per host over HTTP/1.1, so 32 leaves room
    /// for several windows and a few `curl`s.
    public static let maxConcurrent = 32

    /// Ends the stream without reading it: its producer's `onTermination` runs (a consumer
    /// ends an `AsyncStream` by cancelling its iteration; dropping it is not enough while the
    /// producer holds the continuation).
    func stop() {
        StreamedAnswer.iterate(chunks, slots: nil, on: nil, chunk: { _ in }, ended: {}).cancel()
    }
}

/// A streamed admin answer the edge accepted: its head, stamped with the request id, and for
/// a GET its chunks, holding one of the edge's ``AdminStreamSlots`` until they end.
struct StreamedAnswer: Sendable {
    /// What is written first.
    let head: ProxyResponse
    /// The rest of the body; nil for a HEAD (the head alone is answered).
    let chunks: AsyncStream<ByteBuffer>?
    /// Where the place this answer holds is given back.
    let slots: AdminStreamSlots?

    /// Iterates the chunks in a task (preferring `executor`), handing each to `chunk`, then
    /// calls `ended` however the iteration ended (the chunks finished, or the task was
    /// cancelled); the slot is given back just before. Cancel the task to stop.
    func run(on executor: (any TaskExecutor)?, chunk: @escaping @Sendable (ByteBuffer) -> Void,
             ended: @escaping @Sendable () -> Void) -> Task<Void, Never> {
        guard let chunks else {
            slots?.release()
            ended()
            return Task {}
        }
        return Self.iterate(chunks, slots: slots, on: executor, chunk: chunk, ended: ended)
    }

    /// Ends the answer without writing it: the producer's `onTermination` runs and the slot is given back.
    func stop() {
        run(on: nil, chunk: { _ in }, ended: {}).cancel()
    }

    fileprivate static func iterate(_ chunks: AsyncStream<ByteBuffer>, slots: AdminStreamSlots?, on executor: (any TaskExecutor)?,
                                    chunk: @escaping @Sendable (ByteBuffer) -> Void, ended: @escaping @Sendable () -> Void) -> Task<Void, Never> {
        Task(executorPreference: executor) {
            for await next in chunks {
                chunk(next)
            }
            slots?.release()
            ended()
        }
    }
}

/// The streams an edge is writing, at most ``AdminStream/maxConcurrent``. One per edge (copies
/// of an edge share it); an instance has one edge that serves the admin API (the main listener,
/// or the admin listener when there is one), so this is the process's limit.
final class AdminStreamSlots: Sendable {
    /// How many streams may be written at once.
    let limit: Int
    private let taken = Atomic<Int>(0)

    init(limit: Int = AdminStream.maxConcurrent) {
        self.limit = limit
    }

    /// Takes a place, if one is free.
    func take() -> Bool {
        var current = taken.load(ordering: .relaxed)
        while current < limit {
            let (exchanged, original) = taken.compareExchange(expected: current, desired: current + 1, ordering: .relaxed)
            if exchanged { return true }
            current = original
        }
        return false
    }

    /// Gives back a place taken.
    func release() {
        taken.subtract(1, ordering: .relaxed)
    }

    /// How many places are taken.
    var count: Int { taken.load(ordering: .relaxed) }

    /// The answer for a stream asked while every place is taken: 503, with a JSON error body
    /// as the admin API's other errors have.
    static func busyAnswer(limit: Int) -> ProxyResponse {
        var body = ByteBuffer()
        body.writeStaticString("{\"error\":\"too_many_streams\",\"message\":")
        JSONText.writeQuoted("Veneer is already streaming to \(limit) clients; close one (a status page in another tab) and try again.", into: &body)
        body.writeStaticString("}\n")
        var headers = ProxyHeaders()
        headers[.retryAfter] = "5"
        headers[.cacheControl] = "no-store"
        return .json(.serviceUnavailable, body, headers: headers)
    }
}
