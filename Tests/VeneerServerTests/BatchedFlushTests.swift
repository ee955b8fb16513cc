import HTTPTypes
import NIOCore
import NIOEmbedded
import Testing
@testable import VeneerServer
import VeneerCore
import VeneerTestSupport

/// Answers are written as they come and flushed once the event loop has handled its batch of
/// ready sockets (TickFlusher), seen on an embedded channel whose loop runs only when told.
@Suite("answers flushed once per batch")
struct BatchedFlushTests {
    func withConnection(_ body: (EmbeddedChannel, EmbeddedEventLoop) async throws -> Void) async throws {
        let (channel, loop) = try await embeddedConnection([AnswersAtOnce()], limits: ConnectionLimits(requestHeaders: 8192, idleTimeout: .seconds(60)))
        try await body(channel, loop)
        _ = try? channel.finish()
    }

    func outbound(_ channel: EmbeddedChannel) throws -> String {
        var text = ""
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) { text += String(buffer: buffer) }
        return text
    }

    @Test("the answers of one batch wait for its end, then go out together in order")
    func flushedAtTheEndOfTheBatch() async throws {
        try await withConnection { channel, loop in
            try channel.writeInbound(ByteBuffer(string: "GET /posts HTTP/1.1\r\nHost: x\r\nX-Request-Id: one\r\n\r\n"
                + "GET /posts HTTP/1.1\r\nHost: x\r\nX-Request-Id: two\r\n\r\n"))
            #expect(try outbound(channel).isEmpty, "written, not yet flushed")
            loop.run()
            let text = try outbound(channel)
            #expect(text.components(separatedBy: "HTTP/1.1 200 OK\r\n").count == 3)
            #expect(text.range(of: "X-Request-Id: one")!.lowerBound < text.range(of: "X-Request-Id: two")!.lowerBound)
        }
    }

    @Test("answers still waiting for the end of the batch go out before the connection closes")
    func flushedBeforeClosing() async throws {
        try await withConnection { channel, loop in
            try channel.writeInbound(ByteBuffer(string: "GET /posts HTTP/1.1\r\nHost: x\r\n\r\n"))
            // The client's end of input arrives in the same batch: the idle connection closes.
            channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
            #expect(try outbound(channel).hasPrefix("HTTP/1.1 200 OK\r\n"))
            loop.run()
        }
    }
}
