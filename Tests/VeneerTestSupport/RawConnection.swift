import NIOCore
import NIOPosix
import Synchronization
import VeneerCore
import VeneerHTTP1

/// One client connection driven step by step: send some bytes, wait for what the server
/// answers, send more, and see whether (and how) the server closed it. For connection-level
/// behaviour (pipelining, `100 Continue`, idle timeouts, lingering close) that a request at a
/// time cannot show.
public final class RawConnection: Sendable {
    struct State {
        var received: [UInt8] = []
        var closed = false
        var closedAt: ContinuousClock.Instant?
        var error: String?
    }

    private let channel: any Channel
    private let box: StateBox

    private init(channel: any Channel, box: StateBox) {
        self.channel = channel
        self.box = box
    }

    /// Connects to 127.0.0.1:`port`.
    public static func connect(port: Int) async throws -> RawConnection {
        let box = StateBox()
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(RawHTTP.connectTimeout)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Recorder(box: box)) }
            }
            .connect(host: "127.0.0.1", port: port).get()
        return RawConnection(channel: channel, box: box)
    }

    /// Everything received so far.
    public var received: [UInt8] { box.state.withLock { $0.received } }
    /// Whether the server closed the connection.
    public var isClosed: Bool { box.state.withLock { $0.closed } }
    /// When this side saw the server close it (nil while open): a time of the server's own,
    /// free of how often a test looks.
    public var closedAt: ContinuousClock.Instant? { box.state.withLock { $0.closedAt } }
    /// The error the connection ended with (a reset), if any.
    public var error: String? { box.state.withLock { $0.error } }

    /// Sends text as it is.
    public func send(_ text: String) async throws {
        try await send(Array(text.utf8))
    }

    /// Sends bytes as they are.
    public func send(_ bytes: [UInt8]) async throws {
        try await channel.writeAndFlush(ByteBuffer(bytes: bytes))
    }

    /// Waits until `condition` holds for what was received (and whether the connection is
    /// closed), and returns what was received then; throws ``RawHTTPError/timeout`` after
    /// `timeout` (generous by default: a wait that succeeds ends when the bytes come).
    public func wait(timeout: Duration = eventuallyTimeout, until condition: ([UInt8], Bool) -> Bool) async throws -> [UInt8] {
        var bytes: [UInt8] = []
        let held = try await poll(timeout: timeout) {
            let closed: Bool
            (bytes, closed) = box.state.withLock { ($0.received, $0.closed) }
            return condition(bytes, closed)
        }
        guard held else { throw RawHTTPError.timeout }
        return bytes
    }

    /// Waits for `count` whole responses and returns them.
    public func responses(_ count: Int, timeout: Duration = eventuallyTimeout) async throws -> [RawResponse] {
        var parsed: [RawResponse] = []
        _ = try await wait(timeout: timeout) { bytes, _ in
            parsed = Self.parse(bytes)
            return parsed.count >= count
        }
        return parsed
    }

    /// Waits until the server closes the connection.
    public func waitForClose(timeout: Duration = eventuallyTimeout) async throws {
        _ = try await wait(timeout: timeout) { _, closed in closed }
    }

    /// Closes the connection from this side.
    public func close() {
        channel.close(promise: nil)
    }

    /// Resets the connection (RST, not FIN): to the server it is gone at once, mid-request or not.
    public func reset() async throws {
        if let socket = channel as? any SocketOptionProvider {
            try await socket.setSoLinger(linger(l_onoff: 1, l_linger: 0)).get()
        }
        try await channel.close().get()
    }

    /// The whole responses in `bytes`, in order.
    public static func parse(_ bytes: [UInt8]) -> [RawResponse] {
        var parser = HTTP1ResponseParser(maxBodySize: 16 << 20)
        parser.append(ByteBuffer(bytes: bytes))
        var responses: [RawResponse] = []
        while let next = try? parser.next(requestMethod: .get) {
            let head = next.response
            responses.append(RawResponse(status: head.status.code, headers: head.headers.map { ($0.name.rawName, $0.value) },
                                         body: Array(head.body.readableBytesView)))
        }
        return responses
    }

    final class StateBox: Sendable {
        let state = Mutex(State())
    }

    final class Recorder: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        let box: StateBox

        init(box: StateBox) {
            self.box = box
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let buffer = unwrapInboundIn(data)
            box.state.withLock { $0.received += buffer.readableBytesView }
        }

        func channelInactive(context: ChannelHandlerContext) {
            box.state.withLock { state in
                state.closed = true
                state.closedAt = state.closedAt ?? .now
            }
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            box.state.withLock { $0.error = "\(error)" }
            context.close(promise: nil)
        }
    }
}
