import HTTPTypes
import NIOCore
import NIOEmbedded
import Synchronization
import Testing
@testable import VeneerServer
import VeneerCore
import VeneerTestSupport

/// The connection handler stops reading when answers pile up, unsent or unanswered, and
/// reads again once they are gone: seen on an embedded channel, whose writability the test
/// sets as NIO would, and whose `autoRead` switches it records.
@Suite("Connection backpressure")
struct ConnectionBackpressureTests {
    /// Starts each answer by callback and holds it until the test releases it.
    final class Held: CallbackAnswering {
        let callbacks = Mutex<[@Sendable (Result<ProxyResponse, any Error>) -> Void]>([])
        var startsWithoutTask: Bool { true }

        func startAnswer(_ request: ProxyRequest, then done: @escaping @Sendable (Result<ProxyResponse, any Error>) -> Void) -> Bool {
            callbacks.withLock { $0.append(done) }
            return true
        }

        func handle(_ request: ProxyRequest) async throws -> ProxyResponse { .json(.ok, ByteBuffer(string: "[]")) }

        /// Answers the oldest request held.
        func releaseOne() {
            let done = callbacks.withLock { $0.removeFirst() }
            done(.success(.json(.ok, ByteBuffer(string: "[]"))))
        }

        var held: Int { callbacks.withLock { $0.count } }
    }

    func connection(_ chain: [any Handler], pipelineDepth: Int = 16) async throws -> (EmbeddedChannel, EmbeddedEventLoop) {
        try await embeddedConnection(chain, limits: ConnectionLimits(requestHeaders: 8192, pipelineDepth: pipelineDepth))
    }

    /// The last `autoRead` the handler set (true if it never set one).
    func reading(_ channel: EmbeddedChannel) -> Bool {
        channel.options.last { $0.option is ChannelOptions.Types.AutoReadOption }?.value as? Bool ?? true
    }

    func answers(_ channel: EmbeddedChannel) throws -> Int {
        var text = ""
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) { text += String(buffer: buffer) }
        return text.components(separatedBy: "HTTP/1.1 200 OK\r\n").count - 1
    }

    static func requests(_ count: Int) -> ByteBuffer {
        ByteBuffer(string: String(repeating: "GET /posts HTTP/1.1\r\nHost: x\r\n\r\n", count: count))
    }

    @Test("while the unsent answers are over the output buffer nothing is read or answered; once they drain, the rest is")
    func outputBlocked() async throws {
        let (channel, loop) = try await connection([AnswersAtOnce()])
        try channel.writeInbound(Self.requests(1))
        loop.run()
        #expect(try answers(channel) == 1)
        // That answer went over the water mark: NIO says so inside the write.
        channel.isWritable = false
        channel.pipeline.fireChannelWritabilityChanged()
        #expect(!reading(channel))
        // A read already under way when reading stopped: kept, not answered.
        try channel.writeInbound(Self.requests(3))
        loop.run()
        #expect(try answers(channel) == 0)
        channel.isWritable = true
        channel.pipeline.fireChannelWritabilityChanged()
        loop.run()
        #expect(try answers(channel) == 3)
        #expect(reading(channel))
        _ = try? channel.finish()
    }

    @Test("at pipeline_depth requests waiting for answers the socket is not read, and the rest stays unparsed until they are answered")
    func pipelineDepth() async throws {
        let held = Held()
        let (channel, loop) = try await connection([held], pipelineDepth: 2)
        try channel.writeInbound(Self.requests(3))
        #expect(held.held == 1, "one at a time to the chain")
        #expect(!reading(channel))
        held.releaseOne()
        loop.run()
        #expect(held.held == 1 && !reading(channel), "the second is answered; the third still waits unparsed")
        held.releaseOne()
        loop.run()
        #expect(held.held == 1 && reading(channel), "all answered: the third is parsed and reading goes on")
        held.releaseOne()
        loop.run()
        #expect(try answers(channel) == 3)
        _ = try? channel.finish()
    }
}
