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
    let limits: ConnectionLimits
    let dates: HTTPDateCache
    /// `peer_identity`: ask the kernel who owns the client's end of a loopback TCP connection
    /// (one netlink round trip per connection; see ``SockDiag``).
    var loopbackIdentity = false

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        // Who connected, when the kernel can say (a Unix socket): once, for every request of it.
        let peer = loopbackIdentity && !PeerCredentials.isUnixSocket(channel)
            ? channel.eventLoop.makeSucceededFuture(PeerCredentials.loopbackOwner(channel)) : PeerCredentials.read(channel)
        return peer.flatMapThrowing { peer in
            // Unsent answers over `output_buffer` make the channel unwritable, which stops reading
            // it; below half of it, it is read again.
            let high = max(limits.outputBuffer, 2)
            try channel.syncOptions?.setOption(.writeBufferWaterMark, value: .init(low: high / 2, high: high))
            try channel.pipeline.syncOperations.addHandler(
                ProxyRequestHandler(edge: edge, dates: dates, client: ClientAddress(channel.remoteAddress),
                                    localPort: channel.localAddress?.port ?? 0, limits: limits,
                                    eventLoop: channel.eventLoop, logger: logger, peer: peer))
            return Value(channel: channel)
        }
    }

    /// The connection lives until either side closes it (or the server quiesces it).
    func handle(value: Value, logger: Logger) async {
        await withTaskCancellationHandler {
            try? await value.channel.closeFuture.get()
        } onCancel: {
            // Graceful shutdown's wait is over (drain_timeout): the handler answers a request
            // the chain still holds with a 503, logs what it cuts, flushes what waits for the
            // end of the loop's batch (TickFlusher) and closes.
            value.channel.eventLoop.execute {
                value.channel.pipeline.fireUserInboundEventTriggered(ProxyRequestHandler.DrainEnded())
            }
        }
    }
}
