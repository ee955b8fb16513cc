import NIOCore
import NIOPosix
import Synchronization

/// An HTTP/1.1 upstream at the byte level whose every answer a test scripts: for keep-alive,
/// framing and connection-loss cases that a well-behaved server never produces on demand.
///
/// Requests are split by their head and `Content-Length`; the script sees which connection
/// (numbered from 0) and which request on it (from 0) it is answering.
public final class ScriptedUpstream: Sendable {
    /// What the upstream does with one request.
    public enum Action: Sendable {
        /// Sends these bytes and keeps the connection.
        case reply(String)
        /// Sends these bytes after a delay and keeps the connection.
        case replyAfter(Duration, String)
        /// Sends these bytes and closes the connection.
        case replyAndClose(String)
        /// Closes the connection without a byte.
        case close
        /// Never answers.
        case silence
    }

    /// One request as received.
    public struct Received: Sendable {
        public let connection: Int
        public let indexOnConnection: Int
        public let text: String
    }

    /// A keep-alive response with a body and its `Content-Length`.
    public static func ok(_ body: String, extra: String = "") -> String {
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\(extra)\r\n\(body)"
    }

    /// Its port.
    public let port: Int
    private let channel: any Channel
    private let box: StateBox

    /// Connections accepted so far.
    public var connections: Int { box.state.withLock { $0.connections } }
    /// Connections open now (one it closed counts no more once its close completed: the peer
    /// has its end-of-stream).
    public var openConnections: Int { box.state.withLock { $0.open } }
    /// The most connections that were open at one time.
    public var maxConcurrentConnections: Int { box.state.withLock { $0.maxOpen } }
    /// Every request received, in order.
    public var received: [Received] { box.state.withLock { $0.received } }

    /// Starts listening on 127.0.0.1 and a free port.
    public static func start(_ script: @escaping @Sendable (Received) -> Action) async throws -> ScriptedUpstream {
        let box = StateBox()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                let number = box.state.withLock { state in
                    state.connections += 1
                    state.open += 1
                    state.maxOpen = max(state.maxOpen, state.open)
                    return state.connections - 1
                }
                channel.closeFuture.whenComplete { _ in box.state.withLock { $0.open -= 1 } }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ScriptHandler(connection: number, box: box, script: script))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return ScriptedUpstream(port: channel.localAddress!.port!, channel: channel, box: box)
    }

    private init(port: Int, channel: any Channel, box: StateBox) {
        self.port = port
        self.channel = channel
        self.box = box
    }

    /// Its base URL.
    public var url: String { "http://127.0.0.1:\(port)" }

    /// Stops listening.
    public func stop() async {
        try? await channel.close()
    }

    final class StateBox: Sendable {
        let state = Mutex<(connections: Int, open: Int, maxOpen: Int, received: [Received])>((0, 0, 0, []))
    }

    final class ScriptHandler: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        let connection: Int
        let box: StateBox
        let script: @Sendable (Received) -> Action
        var buffer: [UInt8] = []
        var index = 0

        init(connection: Int, box: StateBox, script: @escaping @Sendable (Received) -> Action) {
            self.connection = connection
            self.box = box
            self.script = script
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            buffer += unwrapInboundIn(data).readableBytesView
            while let length = Self.requestLength(buffer) {
                let text = String(decoding: buffer.prefix(length), as: UTF8.self)
                buffer.removeFirst(length)
                let received = Received(connection: connection, indexOnConnection: index, text: text)
                index += 1
                box.state.withLock { $0.received.append(received) }
                switch script(received) {
                case .reply(let bytes):
                    context.writeAndFlush(NIOAny(ByteBuffer(string: bytes)), promise: nil)
                case .replyAfter(let delay, let bytes):
                    let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
                    context.eventLoop.scheduleTask(in: TimeAmount(delay)) {
                        loopBound.value.writeAndFlush(NIOAny(ByteBuffer(string: bytes)), promise: nil)
                    }
                case .replyAndClose(let bytes):
                    let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
                    context.writeAndFlush(NIOAny(ByteBuffer(string: bytes))).whenComplete { _ in
                        loopBound.value.close(promise: nil)
                    }
                    return
                case .close:
                    context.close(promise: nil)
                    return
                case .silence:
                    break
                }
            }
        }

        /// The length of the first complete request in `bytes` (head plus `Content-Length` body).
        static func requestLength(_ bytes: [UInt8]) -> Int? {
            let end: [UInt8] = Array("\r\n\r\n".utf8)
            guard bytes.count >= 4, let headEnd = (0...(bytes.count - 4)).first(where: { Array(bytes[$0..<$0 + 4]) == end }) else { return nil }
            let head = String(decoding: bytes[..<headEnd], as: UTF8.self).lowercased()
            var bodyLength = 0
            for line in head.split(separator: "\r\n") where line.hasPrefix("content-length:") {
                bodyLength = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: " ")) ?? 0
            }
            let total = headEnd + 4 + bodyLength
            return bytes.count >= total ? total : nil
        }
    }
}

extension Substring {
    fileprivate func trimmingCharacters(in set: Character) -> Substring {
        var text = self
        while text.first == set { text.removeFirst() }
        while text.last == set { text.removeLast() }
        return text
    }
}
