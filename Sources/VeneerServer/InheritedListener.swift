import Logging
import NIOCore
import NIOExtras
import NIOPosix
import ServiceLifecycle
import Synchronization

/// A listener on a socket that is already listening, passed by systemd (socket activation):
/// what Hummingbird's `Server` does for the sockets it binds, on a descriptor it cannot take.
///
/// At graceful shutdown it stops accepting and quiesces its connections; the socket itself
/// stays open in systemd (or whoever passed it), whose queue holds new connections until the
/// next process accepts them. Never unlinked: the socket is not Veneer's.
struct InheritedListener: Service {
    let descriptor: Int32
    let connection: ProxyConnection
    let eventLoopGroup: any EventLoopGroup
    let logger: Logger
    let onRunning: @Sendable (any Channel) async -> Void

    /// Stops accepting before the listening channel closes, and lets the connections accepted
    /// meanwhile finish their setup: NIO's accept handler closes a connection whose setup (on
    /// another event loop) completes after the listening channel closed, and its client, whose
    /// request the next process would have answered from the queue, would see a reset.
    static func stopAccepting(_ channel: any Channel, group: any EventLoopGroup) async {
        try? await channel.setOption(ChannelOptions.autoRead, value: false).get()
        // A read already asked for may still accept one batch: twice round every loop (the
        // setups queued there), and back to the listener's (their hops back).
        for _ in 0..<2 {
            for loop in group.makeIterator() { try? await loop.submit {}.get() }
            try? await channel.eventLoop.submit {}.get()
        }
    }

    func run() async throws {
        let quiescing = ServerQuiescingHelper(group: eventLoopGroup)
        let connection = connection, logger = logger
        let server = try await ServerBootstrap(group: eventLoopGroup)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(quiescing.makeServerChannelHandler(channel: channel))
                }
            }
            .childChannelOption(ChannelOptions.allowRemoteHalfClosure, value: true)
            .bind(descriptor) { channel in connection.setup(channel: channel, logger: logger) }
        // Quiescing ends once every connection has closed, the ones accepted but not yet
        // handed out included: the listener's run ends then, not before.
        let quiesced = server.channel.eventLoop.makePromise(of: Void.self)
        let shuttingDown = Atomic(false)
        await withGracefulShutdownHandler {
            await onRunning(server.channel)
            await withDiscardingTaskGroup { group in
                do {
                    try await server.executeThenClose { inbound in
                        for try await child in inbound {
                            group.addTask { await connection.handle(value: child, logger: logger) }
                        }
                    }
                } catch {
                    logger.error("the passed socket stopped accepting", metadata: ["error": .string("\(error)")])
                }
            }
            if !shuttingDown.exchange(true, ordering: .acquiringAndReleasing) { quiesced.succeed() }
        } onGracefulShutdown: {
            guard !shuttingDown.exchange(true, ordering: .acquiringAndReleasing) else { return }
            let channel = server.channel, group = eventLoopGroup
            Task {
                await Self.stopAccepting(channel, group: group)
                quiescing.initiateShutdown(promise: quiesced)
            }
        }
        try? await quiesced.futureResult.get()
    }
}
