/// Events a test waits for, in order, without polling (a handler reached, a build begun).
public final class Signals<Event: Sendable>: Sendable {
    private let stream: AsyncStream<Event>
    private let continuation: AsyncStream<Event>.Continuation

    /// No events yet.
    public init() {
        (stream, continuation) = AsyncStream.makeStream()
    }

    /// Records an event.
    public func send(_ event: Event) { continuation.yield(event) }

    /// The next event, once it came (one waiter at a time: the events are a queue).
    public func next() async -> Event? {
        var iterator = stream.makeAsyncIterator()
        return await iterator.next()
    }
}
