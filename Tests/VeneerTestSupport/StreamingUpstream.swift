import NIOCore
import NIOPosix
import Synchronization

/// An upstream that answers with bodies of any size without holding them: each byte is
/// ``StreamingUpstream/byte(at:)`` of its offset, written as the socket takes it (a reader
/// that stops reading stops it too), so that a test can check a body byte for byte as it
/// passes. And a server-sent events answer whose first event goes out at once and whose rest
/// waits for ``releaseEvents()``.
///
/// - `GET /posts/1?bytes=N`: N bytes with `Content-Length` (cacheable for a minute);
/// - `GET /posts/2?bytes=N`: N bytes, chunked (cacheable for a minute);
/// - `GET /posts/3`: `text/event-stream`, chunked: `data: first`, then after
///   ``releaseEvents()`` `data: second` and the end.
public final class StreamingUpstream: Sendable {
    /// Its port.
    public let port: Int
    private let channel: any Channel
    private let box: Box

    /// Starts listening on 127.0.0.1 and a free port.
    public static func start() async throws -> StreamingUpstream {
        let box = Box()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelOption(.writeBufferWaterMark, value: .init(low: 32 << 10, high: 64 << 10))
            .childChannelInitializer { channel in
                box.state.withLock { $0.connections += 1; $0.open += 1 }
                channel.closeFuture.whenComplete { _ in box.state.withLock { $0.open -= 1 } }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(Answerer(box: box))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return StreamingUpstream(port: channel.localAddress!.port!, channel: channel, box: box)
    }

    private init(port: Int, channel: any Channel, box: Box) {
        self.port = port
        self.channel = channel
        self.box = box
    }

    /// Its base URL.
    public var url: String { "http://127.0.0.1:\(port)" }
    /// Connections accepted so far.
    public var connections: Int { box.state.withLock { $0.connections } }
    /// Connections open now.
    public var openConnections: Int { box.state.withLock { $0.open } }
    /// Whether the events answer's rest has been released.
    public var eventsReleased: Bool { box.state.withLock { $0.released } }
    /// Bodies written to the end, and bodies whose reader left before their end.
    public var bodiesCompleted: Int { box.state.withLock { $0.completed } }

    /// The byte at `offset` of every body.
    public static func byte(at offset: Int) -> UInt8 { UInt8(truncatingIfNeeded: offset &* 31 &+ offset >> 8) }

    /// Lets the events answer go on: its second event, then its end.
    public func releaseEvents() {
        let waiting = box.state.withLock { state in
            state.released = true
            return state.waiting
        }
        for resume in waiting { resume() }
    }

    /// Stops listening.
    public func stop() async {
        try? await channel.close()
    }

    final class Box: Sendable {
        struct State {
            var connections = 0
            var open = 0
            var completed = 0
            var released = false
            var waiting: [@Sendable () -> Void] = []
        }
        let state = Mutex(State())
    }

    final class Answerer: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        let box: Box
        var input: [UInt8] = []
        /// The body being written: next offset, end, chunked.
        var writing: (offset: Int, end: Int, chunked: Bool)?

        init(box: Box) { self.box = box }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            input += unwrapInboundIn(data).readableBytesView
            guard writing == nil, let end = Self.headEnd(input) else { return }
            let head = String(decoding: input.prefix(end), as: UTF8.self)
            input.removeFirst(end)
            let target = head.split(separator: " ").dropFirst().first.map(String.init) ?? "/"
            let bytes = target.split(separator: "=").last.flatMap { Int($0) } ?? 0
            if target.hasPrefix("/posts/1?") {
                context.write(NIOAny(ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nCache-Control: max-age=60\r\n"
                    + "Content-Length: \(bytes)\r\n\r\n")), promise: nil)
                writing = (0, bytes, false)
                writeMore(context: context)
            } else if target.hasPrefix("/posts/2?") {
                context.write(NIOAny(ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nCache-Control: max-age=60\r\n"
                    + "Transfer-Encoding: chunked\r\n\r\n")), promise: nil)
                writing = (0, bytes, true)
                writeMore(context: context)
            } else if target.hasPrefix("/posts/3") {
                let first = "data: first\n\n"
                context.writeAndFlush(NIOAny(ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n"
                    + "Transfer-Encoding: chunked\r\n\r\n" + String(first.utf8.count, radix: 16) + "\r\n" + first + "\r\n")), promise: nil)
                let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
                let eventLoop = context.eventLoop
                let rest: @Sendable () -> Void = {
                    eventLoop.execute {
                        let second = "data: second\n\n"
                        loopBound.value.writeAndFlush(NIOAny(ByteBuffer(string: String(second.utf8.count, radix: 16) + "\r\n" + second + "\r\n0\r\n\r\n")),
                                                      promise: nil)
                    }
                }
                let now = box.state.withLock { state -> Bool in
                    if state.released { return true }
                    state.waiting.append(rest)
                    return false
                }
                if now { rest() }
            } else {
                context.writeAndFlush(NIOAny(ByteBuffer(string: "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")), promise: nil)
            }
        }

        func channelWritabilityChanged(context: ChannelHandlerContext) {
            if context.channel.isWritable { writeMore(context: context) }
            context.fireChannelWritabilityChanged()
        }

        /// Writes the body on while the socket takes it.
        func writeMore(context: ChannelHandlerContext) {
            while var body = writing, context.channel.isWritable {
                let count = min(64 << 10, body.end - body.offset)
                if count == 0 {
                    if body.chunked { context.write(NIOAny(ByteBuffer(string: "0\r\n\r\n")), promise: nil) }
                    context.flush()
                    writing = nil
                    box.state.withLock { $0.completed += 1 }
                    return
                }
                var buffer = context.channel.allocator.buffer(capacity: count + 16)
                if body.chunked { buffer.writeString(String(count, radix: 16) + "\r\n") }
                buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { raw in
                    for index in 0..<count { raw[index] = StreamingUpstream.byte(at: body.offset + index) }
                    return count
                }
                if body.chunked { buffer.writeString("\r\n") }
                body.offset += count
                writing = body
                context.writeAndFlush(NIOAny(buffer), promise: nil)
            }
        }

        static func headEnd(_ bytes: [UInt8]) -> Int? {
            guard bytes.count >= 4 else { return nil }
            for index in 3..<bytes.count where bytes[index - 3] == 13 && bytes[index - 2] == 10 && bytes[index - 1] == 13 && bytes[index] == 10 {
                return index + 1
            }
            return nil
        }
    }
}

/// A client that sends one GET and reads its answer only when told to, checking the body byte
/// for byte against ``StreamingUpstream/byte(at:)`` as it comes (nothing of it is kept): the
/// slow reader of the memory tests.
public final class StreamingReader: Sendable {
    private let channel: any Channel
    private let box: Box

    /// What was read.
    public struct Progress: Sendable {
        /// The answer's head, once it came.
        public var head: String?
        /// Body bytes read (after the head, framing included if chunked).
        public var bodyBytes = 0
        /// The first offset whose byte was not the upstream's, if any.
        public var firstMismatch: Int?
        /// Whether the connection closed.
        public var closed = false
        /// The first 4 KiB of the body, as text.
        public var text = ""
        /// The last bytes read (up to 8).
        public var tail: [UInt8] = []
        /// Whether the body read so far ends with the last chunk of a chunked body.
        public var endsChunked: Bool { tail.suffix(5) == Array("0\r\n\r\n".utf8)[...] }
    }

    /// Connects to `port` and sends `GET target`; reads nothing until ``startReading()``
    /// unless `reading`.
    public static func get(port: Int, _ target: String, reading: Bool = false) async throws -> StreamingReader {
        let box = Box()
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.autoRead, value: reading)
            .channelOption(.socketOption(.so_rcvbuf), value: 64 << 10)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Reader(box: box)) }
            }
            .connect(host: "127.0.0.1", port: port).get()
        try await channel.writeAndFlush(ByteBuffer(string: "GET \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n"))
        return StreamingReader(channel: channel, box: box)
    }

    private init(channel: any Channel, box: Box) {
        self.channel = channel
        self.box = box
    }

    /// Starts (or resumes) reading.
    public func startReading() {
        channel.setOption(.autoRead, value: true).whenSuccess { [channel] in channel.read() }
    }

    /// What was read so far.
    public var progress: Progress { box.progress.withLock { $0 } }

    /// Closes the connection (the client leaves).
    public func close() {
        channel.close(promise: nil)
    }

    final class Box: Sendable {
        let progress = Mutex(Progress())
    }

    final class Reader: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        let box: Box
        var head: [UInt8] = []
        var headDone = false
        var offset = 0

        init(box: Box) { self.box = box }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var buffer = unwrapInboundIn(data)
            if !headDone {
                head += buffer.readBytes(length: buffer.readableBytes) ?? []
                guard let end = StreamingUpstream.Answerer.headEnd(head) else { return }
                headDone = true
                let text = String(decoding: head.prefix(end), as: UTF8.self)
                buffer = ByteBuffer(bytes: head[end...])
                head = []
                box.progress.withLock { $0.head = text }
            }
            let count = buffer.readableBytes
            var mismatch: Int?
            buffer.withUnsafeReadableBytes { raw in
                for index in 0..<raw.count where raw[index] != StreamingUpstream.byte(at: offset + index) {
                    mismatch = offset + index
                    break
                }
            }
            offset += count
            let text = offset - count < 4096 ? String(buffer: buffer) : ""
            box.progress.withLock { progress in
                progress.bodyBytes += count
                if progress.text.utf8.count < 4096 { progress.text += text }
                progress.tail = Array((progress.tail + buffer.readableBytesView.suffix(8)).suffix(8))
                if progress.firstMismatch == nil { progress.firstMismatch = mismatch }
            }
        }

        func channelInactive(context: ChannelHandlerContext) {
            box.progress.withLock { $0.closed = true }
            context.fireChannelInactive()
        }
    }
}
