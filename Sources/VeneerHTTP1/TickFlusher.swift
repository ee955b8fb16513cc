import NIOCore

/// Flushes channels once the event loop has handled the sockets that were ready together
/// (a task queued on the loop runs after that batch of I/O): the writes of one batch go out
/// back to back, so that a peer process they wake (the upstream, the client) is woken about
/// once per batch instead of once per write. One per event loop; touched only on that loop.
///
/// On two busy cores the wake-ups dominated: a write that wakes a sleeping peer costs the
/// writer several microseconds of scheduler work, charged to the proxy.
public final class TickFlusher: @unchecked Sendable {
    private let eventLoop: any EventLoop
    private var pending: [any Channel] = []
    private var spare: [any Channel] = []

    private init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    private static let flushers = PerEventLoop { TickFlusher($0) }

    /// The flusher of `eventLoop` (ask once per connection, not per write).
    public static func `for`(_ eventLoop: any EventLoop) -> TickFlusher {
        flushers(eventLoop)
    }

    /// Flushes `channel` (written to without a flush) at the end of this batch. On the loop only.
    public func flushSoon(_ channel: any Channel) {
        eventLoop.preconditionInEventLoop()
        if pending.isEmpty {
            eventLoop.execute { self.flushAll() }
        }
        pending.append(channel)
    }

    private func flushAll() {
        // Flushing may write more (a callback answering the next request): those go in the next batch.
        swap(&pending, &spare)
        for channel in spare {
            channel.flush()
        }
        spare.removeAll(keepingCapacity: true)
    }
}
