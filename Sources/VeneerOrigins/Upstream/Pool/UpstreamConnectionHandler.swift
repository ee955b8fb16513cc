import NIOCore
import VeneerCore
import VeneerHTTP1

/// The NIO side of one upstream connection: feeds the channel's events to an
/// ``UpstreamConnectionStateMachine`` and does what it says: writes a request, closes the
/// channel, and reports outcomes to its ``UpstreamLoopPool``. Lives on its channel's event
/// loop, as does the pool.
final class UpstreamConnectionHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    typealias ID = UpstreamLoopPool.StateMachine.ConnectionID

    /// Its name in the pool.
    let id: ID
    private var state = UpstreamConnectionStateMachine()
    /// Where outcomes go; set once the connection is established.
    private var pool: UpstreamLoopPool?
    private var context: ChannelHandlerContext?
    /// The last request's buffer, free again once written: no allocation per request.
    private var outputBuffer: ByteBuffer?
    private let flusher: TickFlusher

    init(id: ID, eventLoop: any EventLoop) {
        self.id = id
        flusher = TickFlusher.for(eventLoop)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    /// The connection is established and belongs to `pool`.
    func attach(to pool: UpstreamLoopPool) {
        self.pool = pool
        state.connected()
    }

    /// When the channel has closed (nil once the handler is gone).
    var closeFuture: EventLoopFuture<Void>? { context?.channel.closeFuture }

    /// Sends `request` (the pool runs one at a time on a connection).
    func start(_ request: OutboundRequest) {
        let isActive = context?.channel.isActive ?? false
        guard case .write = state.startRequest(request.method, maxResponseBodySize: request.maxResponseBodySize, channelIsActive: isActive),
              let context
        else {
            pool?.closedBeforeResponse(on: id, requestSent: false)
            return
        }
        var buffer = outputBuffer ?? context.channel.allocator.buffer(capacity: 512 + (request.body?.readableBytes ?? 0))
        outputBuffer = nil  // so that clearing finds the storage unshared
        buffer.clear()
        request.writeHTTP1(into: &buffer)
        // A write that fails closes the channel: channelInactive reports the exchange.
        // Flushed with the other writes of this batch (see TickFlusher).
        context.write(wrapOutboundOut(buffer), promise: nil)
        flusher.flushSoon(context.channel)
        outputBuffer = buffer
    }

    /// The pool gives up on the connection: it closes, and reports nothing more.
    func close() {
        perform(state.close())
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        perform(state.read(unwrapInboundIn(data)))
    }

    func channelInactive(context: ChannelHandlerContext) {
        perform(state.channelInactive())
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // The peer closed its side: a body that runs until the close is complete.
        if case ChannelEvent.inputClosed = event {
            perform(state.inputClosed())
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        perform(state.errorCaught())
    }

    /// Closes first, then reports: the pool hears of an outcome with the connection's fate settled.
    private func perform(_ action: UpstreamConnectionStateMachine.Action) {
        switch action {
        case .none, .write:
            break
        case .notSent:
            pool?.closedBeforeResponse(on: id, requestSent: false)
        case .close:
            context?.close(promise: nil)
        case .deliver(let response, let keepAlive):
            if !keepAlive { context?.close(promise: nil) }
            pool?.responseReceived(on: id, response, keepAlive: keepAlive)
        case .fail(let failure):
            context?.close(promise: nil)
            pool?.requestFailed(on: id, failure)
        case .closedBeforeResponse:
            context?.close(promise: nil)
            pool?.closedBeforeResponse(on: id, requestSent: true)
        }
    }
}
