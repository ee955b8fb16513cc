import HummingbirdCore
import Logging
import NIOCore
import VeneerCore
import VeneerHTTP1

/// The pipeline of one client connection: a single handler, ``ProxyRequestHandler``, which
/// parses each request whole (``HTTP1RequestParser``), answers it through the ``ProxyEdge``
/// and writes the answer as one buffer (``HTTP1ResponseWriter``).
///
/// Hummingbird's `Server` binds the listener and quiesces the connections on graceful
/// shutdown; the connection itself needs no task per request part and no async sequence per
/// read or write, which is most of what serving a cache hit used to cost.
struct ProxyConnection: ServerChildChannel {
    struct Value: ServerChildChannelValue {
        let channel: any Channel
    }

    let edge: ProxyEdge
    let headerLimit: Int
    let dates: HTTPDateCache
    /// How long a connection may sit idle between requests before it is closed (`idle_timeout`).
    let idleTimeout: TimeAmount

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(
                ProxyRequestHandler(edge: edge, dates: dates, client: ClientAddress(channel.remoteAddress), headerLimit: headerLimit,
                                    idleTimeout: idleTimeout, eventLoop: channel.eventLoop, logger: logger))
            return Value(channel: channel)
        }
    }

    /// The connection lives until either side closes it (or the server quiesces it).
    func handle(value: Value, logger: Logger) async {
        await withTaskCancellationHandler {
            try? await value.channel.closeFuture.get()
        } onCancel: {
            // Answers waiting for the end of the loop's batch (TickFlusher) go out first.
            value.channel.eventLoop.execute {
                value.channel.flush()
                value.channel.close(promise: nil)
            }
        }
    }
}
