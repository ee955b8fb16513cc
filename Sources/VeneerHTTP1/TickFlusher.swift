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
    /// The handlers' contexts whose writes wait: flushed from there, as `context.flush()`
    /// (a flush of the whole channel starts at its tail and passes every handler on the way:
    /// some 240 instructions more a flush, callgrind).
    private var pending: [ChannelHandlerContext] = []
    private var spare: [ChannelHandlerContext] = []

    private init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    private static let flushers = PerEventLoop { TickFlusher($0) }

    /// The flusher of `eventLoop` (ask once per connection, not per write).
    public static func `for`(_ eventLoop: any EventLoop) -> TickFlusher {
        flushers(eventLoop)
    }

    /// Flushes what the handler of `context` wrote through it without a flush, at the end of
    /// this batch (as `context.flush()`: the handlers between it and the socket see the flush).
    /// On the loop only.
    public func flushSoon(_ context: ChannelHandlerContext) {
        eventLoop.preconditionInEventLoop()
        if pending.isEmpty {
            eventLoop.execute { self.flushAll() }
        }
        pending.append(context)
    }

    private func flushAll() {
        // Flushing may write more (a callback answering the next request): those go in the next batch.
        swap(&pending, &spare)
        for context in spare {
            context.flush()
        }
        spare.removeAll(keepingCapacity: true)
    }
}
