import NIOCore
import NIOPosix
import Synchronization

/// An upstream that answers every connection with fixed bytes and closes it: for broken
/// and partial responses no real server would send.
public final class RawUpstream: Sendable {
    /// Its port.
    public let port: Int
    private let channel: any Channel
    private let counter: Counter

    /// Connections accepted so far.
    public var connections: Int { counter.value }

    /// Starts listening on 127.0.0.1 and a free port.
    public static func start(reply: [UInt8]) async throws -> RawUpstream {
        let counter = Counter()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                counter.increment()
                return channel.pipeline.addHandler(ReplyHandler(reply: reply))
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return RawUpstream(port: channel.localAddress!.port!, channel: channel, counter: counter)
    }

    private init(port: Int, channel: any Channel, counter: Counter) {
        self.port = port
        self.channel = channel
        self.counter = counter
    }

    /// Stops listening.
    public func stop() async {
        try? await channel.close()
    }

    final class Counter: Sendable {
        private let count = Mutex(0)
        var value: Int { count.withLock { $0 } }
        func increment() { count.withLock { $0 += 1 } }
    }

    final class ReplyHandler: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        let reply: [UInt8]
        var received: [UInt8] = []
        var answered = false
        init(reply: [UInt8]) { self.reply = reply }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            received += unwrapInboundIn(data).readableBytesView
            guard !answered, String(decoding: received, as: UTF8.self).contains("\r\n\r\n") else { return }
            answered = true
            context.writeAndFlush(NIOAny(ByteBuffer(bytes: reply)), promise: nil)
            context.close(promise: nil)
        }
    }
}

