import Crypto
import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// An upstream that takes request bodies (uploads) and says what it got: each body's length,
/// its SHA-256, and whether it came chunked, answered `{"bytes":N,"sha256":"..."}`.
///
/// Paths: `/uploads/stall...` reads nothing of a body until ``release()`` (the slowest
/// reader), then reads it whole; `/uploads/early...` answers 413 (`/uploads/deny...` 401) as soon as the head arrives
/// and drops the rest (an upstream refusing an upload early); any other path reads at once.
/// A stalled reader notices its connection closing only once released. Nothing of a body is kept beyond its hash.
public final class UploadUpstream: Sendable {
    /// Its port.
    public let port: Int
    private let channel: any Channel
    private let box: Box

    /// One body the upstream read whole.
    public struct Received: Sendable {
        /// The request line's target.
        public var target: String
        /// The body's length.
        public var bytes: Int
        /// Its SHA-256, in hex.
        public var sha256: String
        /// Whether it came with `Transfer-Encoding: chunked`.
        public var chunked: Bool
    }

    /// Starts listening on 127.0.0.1 and a free port.
    public static func start() async throws -> UploadUpstream {
        let box = Box()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: 64 << 10))
            .childChannelOption(.socketOption(.so_rcvbuf), value: 64 << 10)
            .childChannelInitializer { channel in
                box.state.withLock { $0.connections += 1; $0.open += 1 }
                channel.closeFuture.whenComplete { _ in box.state.withLock { $0.open -= 1 } }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(Taker(box: box))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return UploadUpstream(port: channel.localAddress!.port!, channel: channel, box: box)
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
    /// Request heads seen so far.
    public var heads: Int { box.state.withLock { $0.heads } }
    /// The bodies read whole, in the order they ended.
    public var received: [Received] { box.state.withLock { $0.received } }
    /// Body bytes read so far, all requests together (those dropped after an early answer included).
    public var bytesRead: Int { box.state.withLock { $0.bytesRead } }

    /// Lets the stalled readers read.
    public func release() {
        let waiting = box.state.withLock { state in
            state.released = true
            defer { state.waiting = [] }
            return state.waiting
        }
        for resume in waiting { resume() }
    }

    /// Stops listening.
    public func stop() async {
        try? await channel.close()
    }

    /// The SHA-256 of the first `count` bytes of ``StreamingUpstream/byte(at:)``'s pattern, in hex.
    public static func patternSHA256(_ count: Int) -> String {
        var hasher = SHA256()
        var offset = 0
        var piece = [UInt8](repeating: 0, count: 64 << 10)
        while offset < count {
            let length = min(piece.count, count - offset)
            for index in 0..<length { piece[index] = StreamingUpstream.byte(at: offset + index) }
            hasher.update(data: piece[0..<length])
            offset += length
        }
        return hex(hasher.finalize())
    }

    /// Bytes as lowercase hex.
    static func hex(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        for byte in bytes { text += [digits[Int(byte >> 4)], digits[Int(byte & 15)]] }
        return String(decoding: text, as: UTF8.self)
    }

    final class Box: Sendable {
        struct State {
            var connections = 0
            var open = 0
            var heads = 0
            var bytesRead = 0
            var received: [Received] = []
            var released = false
            var waiting: [@Sendable () -> Void] = []
        }
        let state = Mutex(State())
    }

    final class Taker: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        let box: Box
        var input: [UInt8] = []
        /// The body being read: its target, bytes left (nil: chunked), the hash so far.
        var body: (target: String, remaining: Int?, hasher: SHA256, bytes: Int)?
        /// Of a chunked body: the bytes left of the current chunk (nil: a size line is next).
        var chunkLeft: Int?
        var refused = false

        init(box: Box) { self.box = box }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let bytes = unwrapInboundIn(data).readableBytesView
            guard !refused else {
                box.state.withLock { $0.bytesRead += bytes.count }
                return
            }
            input += bytes
            process(context: context)
        }

        func process(context: ChannelHandlerContext) {
            while true {
                if body == nil {
                    guard let end = StreamingUpstream.Answerer.headEnd(input) else { return }
                    let head = String(decoding: input.prefix(end), as: UTF8.self)
                    input.removeFirst(end)
                    box.state.withLock { $0.heads += 1 }
                    let target = head.split(separator: " ").dropFirst().first.map(String.init) ?? "/"
                    let lines = head.lowercased().split(separator: "\r\n")
                    let length = lines.first { $0.hasPrefix("content-length:") }.flatMap { Int($0.dropFirst(15).trimmingCharacters(in: .whitespaces)) }
                    let chunked = lines.contains { $0.hasPrefix("transfer-encoding:") && $0.contains("chunked") }
                    if target.hasPrefix("/uploads/early") || target.hasPrefix("/uploads/deny") {
                        // What follows is read and dropped (so that the proxy's close is seen).
                        refused = true
                        input = []
                        let status = target.hasPrefix("/uploads/deny") ? "401 Unauthorized\r\nWWW-Authenticate: Bearer" : "413 Content Too Large"
                        context.writeAndFlush(NIOAny(ByteBuffer(string: "HTTP/1.1 \(status)\r\nContent-Type: application/json\r\n"
                            + "Content-Length: 19\r\n\r\n{\"error\":\"too_big\"}")), promise: nil)
                        return
                    }
                    body = (target, chunked ? nil : (length ?? 0), SHA256(), 0)
                    chunkLeft = nil
                    if target.hasPrefix("/uploads/stall") {
                        let stalled = box.state.withLock { state -> Bool in
                            guard !state.released else { return false }
                            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                            let loop = context.eventLoop
                            state.waiting.append {
                                loop.execute {
                                    let (taker, context) = loopBound.value
                                    try? context.channel.syncOptions?.setOption(.autoRead, value: true)
                                    context.read()
                                    taker.process(context: context)
                                }
                            }
                            return true
                        }
                        if stalled {
                            try? context.channel.syncOptions?.setOption(.autoRead, value: false)
                            return
                        }
                    }
                }
                guard takeBody(context: context) else { return }
            }
        }

        /// Reads what it can of the body; true when it ended (and was answered).
        func takeBody(context: ChannelHandlerContext) -> Bool {
            guard var current = body else { return false }
            var consumed = 0
            defer {
                if consumed > 0 { input.removeFirst(consumed) }
            }
            func hash(_ count: Int) {
                current.hasher.update(data: input[consumed..<(consumed + count)])
                current.bytes += count
                consumed += count
                box.state.withLock { $0.bytesRead += count }
            }
            var ended = false
            if let remaining = current.remaining {
                let count = min(remaining, input.count)
                hash(count)
                current.remaining = remaining - count
                ended = current.remaining == 0
            } else {
                while !ended {
                    if let left = chunkLeft {
                        if left > 0 {
                            let count = min(left, input.count - consumed)
                            guard count > 0 else { break }
                            hash(count)
                            chunkLeft = left - count
                            continue
                        }
                        guard input.count - consumed >= 2 else { break }
                        consumed += 2
                        chunkLeft = nil
                    } else {
                        guard let lineEnd = Self.lineEnd(input, from: consumed) else { break }
                        let line = String(decoding: input[consumed..<lineEnd], as: UTF8.self)
                        let size = Int(line.split(separator: ";").first ?? "", radix: 16) ?? 0
                        if size == 0 {
                            // No trailers: the empty line after the last chunk ends it.
                            guard input.count >= lineEnd + 4 else { break }
                            consumed = lineEnd + 4
                            ended = true
                        } else {
                            consumed = lineEnd + 2
                            chunkLeft = size
                        }
                    }
                }
            }
            body = current
            guard ended else { return false }
            body = nil
            let digest = UploadUpstream.hex(current.hasher.finalize())
            box.state.withLock { $0.received.append(Received(target: current.target, bytes: current.bytes, sha256: digest, chunked: current.remaining == nil)) }
            let answer = "{\"bytes\":\(current.bytes),\"sha256\":\"\(digest)\"}"
            context.writeAndFlush(NIOAny(ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(answer.utf8.count)\r\n\r\n"
                + answer)), promise: nil)
            return true
        }

        static func lineEnd(_ bytes: [UInt8], from start: Int) -> Int? {
            guard bytes.count >= start + 2 else { return nil }
            for index in start..<(bytes.count - 1) where bytes[index] == 13 && bytes[index + 1] == 10 { return index }
            return nil
        }
    }
}

/// A client that sends one request whose body is ``StreamingUpstream/byte(at:)``'s pattern,
/// as fast as the connection takes it (nothing of it is held beyond one piece), with a
/// `Content-Length` or chunked, and reads the answer. It may stop sending after some bytes
/// and leave (``leave()``).
public final class Uploader: Sendable {
    private let channel: any Channel
    private let box: Box

    /// What happened so far.
    public struct Progress: Sendable {
        /// Body bytes written to the socket.
        public var sent = 0
        /// What was read of the answer, as text.
        public var answer = ""
        /// Whether the connection closed.
        public var closed = false
        /// The answer's status, once its head came.
        public var status: Int? {
            let line = answer.split(separator: "\r\n").first ?? ""
            return line.split(separator: " ").dropFirst().first.flatMap { Int($0) }
        }
    }

    /// Connects to `port` and sends `method target` with a body of `size` bytes (chunked in
    /// pieces of 64 KB when `chunked`); stops after `stopAfter` bytes if given (the connection
    /// stays open until ``leave()``, the rest follows on ``resume()``).
    public static func send(port: Int, _ method: String = "PUT", _ target: String, size: Int, chunked: Bool = false, stopAfter: Int? = nil,
                            headers: [String] = []) async throws -> Uploader {
        let box = Box()
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.writeBufferWaterMark, value: .init(low: 32 << 10, high: 128 << 10))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(Sender(box: box, size: size, chunked: chunked, limit: stopAfter ?? size))
                }
            }
            .connect(host: "127.0.0.1", port: port).get()
        let framing = chunked ? "Transfer-Encoding: chunked" : "Content-Length: \(size)"
        let extra = headers.map { $0 + "\r\n" }.joined()
        channel.pipeline.fireUserInboundEventTriggered(Sender.Begin(head: "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\(framing)\r\n\(extra)\r\n"))
        return Uploader(channel: channel, box: box)
    }

    private init(channel: any Channel, box: Box) {
        self.channel = channel
        self.box = box
    }

    /// What happened so far.
    public var progress: Progress { box.progress.withLock { $0 } }

    /// Closes the connection (the client leaves).
    public func leave() {
        channel.close(promise: nil)
    }

    /// Sends the rest of the body after a `stopAfter`.
    public func resume() {
        channel.pipeline.fireUserInboundEventTriggered(Sender.Resume())
    }

    final class Box: Sendable {
        let progress = Mutex(Progress())
    }

    final class Sender: ChannelDuplexHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        typealias OutboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        struct Begin { let head: String }
        struct Resume {}
        let box: Box
        let size: Int
        let chunked: Bool
        var limit: Int
        var offset = 0
        var begun = false
        var ended = false

        init(box: Box, size: Int, chunked: Bool, limit: Int) {
            self.box = box
            self.size = size
            self.chunked = chunked
            self.limit = limit
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if event is Resume {
                limit = size
                ended = false
                writeMore(context: context)
                return
            }
            guard let begin = event as? Begin else { return context.fireUserInboundEventTriggered(event) }
            context.write(wrapOutboundOut(ByteBuffer(string: begin.head)), promise: nil)
            begun = true
            writeMore(context: context)
        }

        func channelWritabilityChanged(context: ChannelHandlerContext) {
            if context.channel.isWritable { writeMore(context: context) }
        }

        func writeMore(context: ChannelHandlerContext) {
            while begun, !ended, context.channel.isWritable, context.channel.isActive {
                let count = min(64 << 10, limit - offset)
                if count == 0 {
                    ended = true
                    if offset == size, chunked { context.write(wrapOutboundOut(ByteBuffer(string: "0\r\n\r\n")), promise: nil) }
                    context.flush()
                    return
                }
                var buffer = context.channel.allocator.buffer(capacity: count + 16)
                if chunked { buffer.writeString(String(count, radix: 16) + "\r\n") }
                let start = offset
                buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { raw in
                    for index in 0..<count { raw[index] = StreamingUpstream.byte(at: start + index) }
                    return count
                }
                if chunked { buffer.writeString("\r\n") }
                offset += count
                let sent = offset
                context.writeAndFlush(wrapOutboundOut(buffer)).whenSuccess { [box] in box.progress.withLock { $0.sent = max($0.sent, sent) } }
            }
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let text = String(buffer: unwrapInboundIn(data))
            box.progress.withLock { $0.answer += text }
        }

        func channelInactive(context: ChannelHandlerContext) {
            box.progress.withLock { $0.closed = true }
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }
    }
}
