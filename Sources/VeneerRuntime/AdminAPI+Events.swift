import HTTPTypes
import NIOCore
import VeneerCore
import VeneerServer

extension AdminAPI {
    /// `GET /-/events`: the requests kept after `Last-Event-ID` (or `?after=`), then each
    /// new one as it is answered, one `request` event each (`id:` its sequence). A comment
    /// line every 15 s keeps idle connections (and proxies between) from timing out.
    func stream(path: String, query: String?, headers: HTTPFields) -> AdminStream? {
        guard path == "events", let feed else { return nil }
        let after = headers[.lastEventID].flatMap { Int($0) } ?? AdminRequest(method: .get, rest: "", query: query).parameter("after").flatMap { Int($0) }
        let (backlog, items) = feed.subscribe(after: after)
        var first = ByteBuffer(string: "retry: 2000\n\n")
        for item in backlog { Self.writeEvent(item, into: &first) }
        // Bounded: a loop that falls behind loses the oldest events, it does not hoard them.
        let chunks = AsyncStream<ByteBuffer>(bufferingPolicy: .bufferingNewest(256)) { continuation in
            let task = Task {
                await withTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for await item in items {
                            var buffer = ByteBuffer()
                            Self.writeEvent(item, into: &buffer)
                            continuation.yield(buffer)
                        }
                        continuation.finish()
                    }
                    group.addTask {
                        while !Task.isCancelled {
                            try? await Task.sleep(for: .seconds(15))
                            if Task.isCancelled { break }
                            continuation.yield(ByteBuffer(string: ": keep-alive\n\n"))
                        }
                    }
                    await group.next()
                    group.cancelAll()
                }
            }
            // The edge stopped reading (the client left, or shutdown): stop feeding, which
            // ends the subscription.
            continuation.onTermination = { _ in task.cancel() }
        }
        return AdminStream(head: ProxyResponse(status: .ok, headers: Self.eventStreamHeaders, body: first), chunks: chunks)
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
