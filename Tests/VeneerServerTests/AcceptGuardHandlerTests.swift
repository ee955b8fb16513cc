@testable import VeneerServer
import Logging
import NIOCore
import NIOEmbedded
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Counts the `read()`s that get past the guard towards the socket.
final class ReadCounter: ChannelOutboundHandler {
    typealias OutboundIn = Never
    var reads = 0
    func read(context: ChannelHandlerContext) {
        reads += 1
        context.read()
    }
}

/// What reaches the rest of the server pipeline.
final class Tail: ChannelInboundHandler {
    typealias InboundIn = any Channel
    var children: [any Channel] = []
    var errors: [any Error] = []
    func channelRead(context: ChannelHandlerContext, data: NIOAny) { children.append(Self.unwrapInboundIn(data)) }
    func errorCaught(context: ChannelHandlerContext, error: any Error) { errors.append(error) }
}

@Suite("Accept guard on the listening socket")
struct AcceptGuardHandlerTests {
    let counter = ReadCounter()
    let tail = Tail()
    let channel = EmbeddedChannel()

    init() throws {
        try channel.pipeline.syncOperations.addHandler(counter)
        try channel.pipeline.syncOperations.addHandler(AcceptGuardHandler(
            limit: 1, backoff: .init(minimum: .milliseconds(10), maximum: .seconds(1)), logger: Logger(label: "test")))
        try channel.pipeline.syncOperations.addHandler(tail)
    }

    @Test("out of descriptors, reads are held (even NIO backoff's own) and pass again after the backoff; EMFILE goes no further")
    func readsAreHeldWhileOutOfDescriptorsAndPassAfterTheBackoff() throws {
        channel.read()
        #expect(counter.reads == 1)
        channel.pipeline.fireErrorCaught(IOError(errnoCode: EMFILE, reason: "accept4"))
        // The read NIO's AcceptBackoffHandler would schedule must not re-arm the socket.
        channel.read()
        #expect(counter.reads == 1)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(10))
        channel.read()
        #expect(counter.reads == 2)
        #expect(tail.errors.isEmpty, "EMFILE is handled here, not passed to NIO's backoff")
    }

    @Test("other accept errors pass on, and reads with them")
    func otherAcceptErrorsPassOn() {
        channel.pipeline.fireErrorCaught(IOError(errnoCode: ECONNABORTED, reason: "accept4"))
        #expect(tail.errors.count == 1)
        channel.read()
        #expect(counter.reads == 1)
    }

    @Test("a connection beyond the limit is closed at once and never passed on; a closed one frees its slot")
    func aConnectionBeyondTheLimitIsClosedAtOnceAndNeverPassedOn() throws {
        let first = EmbeddedChannel()
        let second = EmbeddedChannel()
        channel.pipeline.fireChannelRead(first as any Channel)
        channel.pipeline.fireChannelRead(second as any Channel)
        #expect(tail.children.count == 1)
        #expect(isClosed(second))
        #expect(!isClosed(first))
        // When the first closes, a slot is free again.
        _ = try first.finish()
        channel.embeddedEventLoop.run()
        let third = EmbeddedChannel()
        channel.pipeline.fireChannelRead(third as any Channel)
        #expect(tail.children.count == 2)
        #expect(!isClosed(third))
    }

    private func isClosed(_ channel: EmbeddedChannel) -> Bool {
        var closed = false
        channel.closeFuture.assumeIsolated().whenComplete { _ in closed = true }
        channel.embeddedEventLoop.run()
        return closed
    }
}
