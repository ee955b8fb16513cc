// floor canned PORT ANSWERFILE | floor forward PORT UPSTREAMPORT
// The least a SwiftNIO server does per request on one event loop: `canned` answers every request
// head (counted by its blank line) with fixed bytes; `forward` gives each client connection one
// upstream connection and copies bytes both ways without parsing them.
import NIOCore
import NIOPosix
import Foundation

final class Canned: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    let answer: ByteBuffer
    var tail: UInt32 = 0
    init(answer: ByteBuffer) { self.answer = answer }
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        var heads = 0
        var t = tail
        buffer.withUnsafeReadableBytes { bytes in
            for b in bytes {
                t = (t << 8) | UInt32(b)
                if t == 0x0d0a0d0a { heads += 1 }
            }
        }
        tail = t
        for _ in 0..<heads { context.write(wrapOutboundOut(answer), promise: nil) }
    }
    func channelReadComplete(context: ChannelHandlerContext) { context.flush() }
}

final class Glue: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    var peer: Channel?
    var pending: [ByteBuffer] = []
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        if let peer { peer.write(buffer, promise: nil) } else { pending.append(buffer) }
    }
    func channelReadComplete(context: ChannelHandlerContext) { peer?.flush() }
    func attach(_ channel: Channel) {
        peer = channel
        for b in pending { channel.write(b, promise: nil) }
        pending = []
        channel.flush()
    }
    func channelInactive(context: ChannelHandlerContext) { peer?.close(promise: nil) }
}

let args = CommandLine.arguments
let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
let port = Int(args[2])!
let bootstrap: ServerBootstrap
if args[1] == "canned" {
    let data = try Data(contentsOf: URL(fileURLWithPath: args[3]))
    let answer = ByteBuffer(bytes: data)
    bootstrap = ServerBootstrap(group: group)
        .serverChannelOption(.backlog, value: 1024)
        .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
        .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
        .childChannelInitializer { channel in
            channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Canned(answer: answer)) }
        }
} else {
    let upstream = Int(args[3])!
    bootstrap = ServerBootstrap(group: group)
        .serverChannelOption(.backlog, value: 1024)
        .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
        .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
        .childChannelInitializer { client in
            let toUpstream = Glue()
            let toClient = Glue()
            return client.eventLoop.makeCompletedFuture { try client.pipeline.syncOperations.addHandler(toUpstream) }
                .flatMap {
                    ClientBootstrap(group: client.eventLoop)
                        .channelOption(.socketOption(.tcp_nodelay), value: 1)
                        .channelInitializer { up in
                            up.eventLoop.makeCompletedFuture { try up.pipeline.syncOperations.addHandler(toClient) }
                        }
                        .connect(host: "127.0.0.1", port: upstream)
                        .map { up in
                            toClient.peer = client
                            toUpstream.attach(up)
                        }
                }
        }
}
let channel = try bootstrap.bind(host: "127.0.0.1", port: port).wait()
try channel.closeFuture.wait()
