import Logging
import NIOCore

/// The first handler of a listening socket's pipeline (nearest the socket): it performs
/// ``AcceptStateMachine``'s actions.
///
/// Out of descriptors it turns `autoRead` off, which drops the socket's read interest from
/// epoll, and turns it on again after the backoff; it holds every `read()` meanwhile, including
/// the late one NIO's own `AcceptBackoffHandler` schedules. Beyond `limit` open connections it
/// closes each new connection before anything else sees it.
///
/// It must sit before NIO's `AcceptBackoffHandler` (errors travel towards the tail, and that
/// handler swallows them) and before any handler that tracks accepted channels (a quiescing
/// helper), so that refused connections are never counted or served.
final class AcceptGuardHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = any Channel
    typealias InboundOut = any Channel
    typealias OutboundIn = Never
    typealias OutboundOut = Never

    private var machine: AcceptStateMachine
    private var retry: Scheduled<Void>?
    private let logger: Logger
    private let reserve: DescriptorReserve

    /// A guard admitting up to `limit` connections at once, pausing by `backoff` when accept
    /// runs out of descriptors.
    init(limit: Int, backoff: AcceptStateMachine.Backoff = .standard, logger: Logger, reserve: DescriptorReserve = .shared) {
        self.machine = AcceptStateMachine(limit: limit, backoff: backoff)
        self.logger = logger
        self.reserve = reserve
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let child = Self.unwrapInboundIn(data)
        switch machine.accepted() {
        case .refuse:
            // Not yet registered: closing releases the descriptor and the client sees a close.
            child.close(promise: nil)
        case .admit:
            let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
            child.closeFuture.hop(to: context.eventLoop).whenComplete { _ in
                loopBound.value.machine.connectionClosed()
            }
            context.fireChannelRead(data)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        switch machine.acceptFailed(AcceptStateMachine.AcceptFailure(error)) {
        case .forward:
            context.fireErrorCaught(error)
        case .ignore:
            break
        case .pause(let retryAfter, let episodeBegins):
            // Room for the rest of the process while accepts pause (see DescriptorReserve).
            reserve.release()
            if episodeBegins {
                logger.warning("accept failed, pausing accepts until descriptors free", metadata: [
                    "error": "\(error)", "open_connections": "\(machine.open)",
                ])
            }
            // Not forwarded: NIO's AcceptBackoffHandler would add a second, 1 s pause of its own
            // to the first read after recovery.
            setAutoRead(false, context: context)
            let loopBound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
            retry = context.eventLoop.scheduleTask(in: retryAfter) {
                let (handler, context) = loopBound.value
                handler.retry = nil
                if handler.machine.retryDue() == .resume {
                    handler.reserve.take()
                    handler.setAutoRead(true, context: context)
                }
            }
        }
    }

    func read(context: ChannelHandlerContext) {
        if machine.readRequested() == .read {
            context.read()
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        machine.closed()
        retry?.cancel()
        retry = nil
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        retry?.cancel()
        retry = nil
        if case .paused = machine.state {
            // Removed while paused: leave the socket reading, or it would never accept again.
            machine.closed()
            setAutoRead(true, context: context)
        }
    }

    /// `autoRead` is the switch that adds or drops the listening socket's read interest; a
    /// closed channel refuses it, which needs no handling.
    private func setAutoRead(_ on: Bool, context: ChannelHandlerContext) {
        if let options = context.channel.syncOptions {
            try? options.setOption(ChannelOptions.autoRead, value: on)
        } else {
            context.channel.setOption(ChannelOptions.autoRead, value: on).whenFailure { _ in }
        }
    }
}
