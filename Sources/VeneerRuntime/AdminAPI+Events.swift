import HTTPTypes
import NIOCore
import VeneerConfig
import VeneerCore
import VeneerServer

extension AdminAPI {
    /// How often a stream sends what was answered since it last looked.
    static let eventBatchInterval = Duration.milliseconds(100)
    /// After this many quiet batches, a comment line keeps idle connections (and proxies
    /// between) from timing out: 15 s.
    static let keepAliveBatches = 150

    /// `GET /-/events`: the requests kept after `Last-Event-ID` (or `?after=`), then what is
    /// answered, one `request` event each (`id:` its sequence), sent in batches every 100 ms:
    /// a stream costs the same whatever the request rate, and a request the same whatever
    /// the streams open. A stream that falls more than 100 requests behind in one batch (the
    /// feed's size) skips the oldest.
    func stream(path: String, query: String?, headers: HTTPFields) -> AdminStream? {
        guard path == "events", let feed else { return nil }
        // Not this instance's environment: ``respond`` answers 409, as for any admin path.
        if let asked = AdminRequest(method: .get, rest: "", query: query).parameter("environment"), asked != chain.generation.spec.name {
            return nil
        }
        // A malformed position: ``respond`` answers 400.
        guard case .success(let after) = Self.eventsAfter(query: query, headers: headers) else { return nil }
        let watch = feed.watch()
        let backlog = feed.recent(after: after)
        var first = ByteBuffer(string: "retry: 2000\n\n")
        for item in backlog { Self.writeEvent(item, into: &first) }
        let start = backlog.last?.sequence ?? max(after ?? 0, feed.lastSequence)
        // Bounded: a loop that falls behind loses the oldest batches, it does not hoard them.
        let chunks = AsyncStream<ByteBuffer>(bufferingPolicy: .bufferingNewest(64)) { continuation in
            let task = Task {
                var last = start, quiet = 0
                while !Task.isCancelled {
                    try? await Task.sleep(for: Self.eventBatchInterval)
                    let items = feed.recent(after: last)
                    if let newest = items.last {
                        var buffer = ByteBuffer()
                        for item in items {
                            // Encoded once for every stream open.
                            var event = item.rendered { item in
                                var bytes = ByteBuffer()
                                Self.writeEvent(item, into: &bytes)
                                return bytes
                            }
                            buffer.writeBuffer(&event)
                        }
                        last = newest.sequence
                        quiet = 0
                        continuation.yield(buffer)
                    } else {
                        quiet += 1
                        if quiet >= Self.keepAliveBatches {
                            quiet = 0
                            continuation.yield(ByteBuffer(string: ": keep-alive\n\n"))
                        }
                    }
                }
                // The watch ends with the stream.
                withExtendedLifetime(watch) {}
                continuation.finish()
            }
            // The edge stopped reading (the client left, or shutdown): stop looking.
            continuation.onTermination = { _ in task.cancel() }
        }
        return AdminStream(head: ProxyResponse(status: .ok, headers: Self.eventStreamHeaders, body: first), chunks: chunks)
    }

    /// The sequence numbers of events: what `Last-Event-ID` and `?after=` may say.
    static let sequenceBounds = Bounded<Counts>(0...Int.max)

    /// Where a stream starts: after `Last-Event-ID` (what a reconnecting `EventSource` sends),
    /// else after `?after=`, else from the oldest request kept; a position that is not a
    /// sequence number is a 400.
    static func eventsAfter(query: String?, headers: HTTPFields) -> Result<Int?, ProxyError> {
        let (name, text): (String, String?) = if let header = headers[.lastEventID] { ("Last-Event-ID", header) } else {
            ("after", AdminRequest(method: .get, rest: "", query: query).parameter("after"))
        }
        guard let text else { return .success(nil) }
        switch sequenceBounds.parse(text) {
        case .success(let sequence): return .success(sequence)
        case .failure: return .failure(.badRequest("\(name) must be an event id, a whole number from 0 to \(Int.max)."))
        }
    }

    /// One `request` event.
    static func writeEvent(_ item: RequestFeed.Item, into buffer: inout ByteBuffer) {
        buffer.writeString("id: \(item.sequence)\nevent: request\ndata: ")
        // JSON has no raw newline: one data line.
        item.json.write(into: &buffer)
        buffer.writeStaticString("\n\n")
    }
}

extension HTTPField.Name {
    /// `Last-Event-ID`: the last event a reconnecting `EventSource` saw.
    static let lastEventID = HTTPField.Name("Last-Event-ID")!
}
