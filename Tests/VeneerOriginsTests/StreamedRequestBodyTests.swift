import HTTPTypes
import NIOCore
import NIOPosix
import Synchronization
import Testing
@testable import VeneerCore
import VeneerOrigins
import VeneerTestSupport

/// A request body that streams (``OutboundRequest/bodyStream``) through the pooled plain-HTTP
/// transport: sent part by part as its producer gives them, with its `Content-Length` or
/// chunked; a producer that stops mid-body, and an upstream that answers early, close the
/// connection instead of pooling it.
@Suite("Streamed request bodies")
struct StreamedRequestBodyTests {
    /// The producer side of a request body, as the client's connection would be: it gives one
    /// part each time one is asked for, then ends (or fails, when `failAfter` parts went; or
    /// gives nothing more, a client pausing, when `pauseAfter` parts went).
    final class Producer: BodyStream.Source, @unchecked Sendable {
        let parts: [ByteBuffer]
        let failAfter: Int?
        let pauseAfter: Int?
        var stream: BodyStream?
        private let sent = Mutex((parts: 0, cancelled: false))
        /// Parts handed out so far.
        var partsSent: Int { sent.withLock { $0.parts } }
        /// Whether the consumer (the upstream connection) gave up on the body.
        var cancelled: Bool { sent.withLock { $0.cancelled } }

        init(parts: [ByteBuffer], failAfter: Int? = nil, pauseAfter: Int? = nil) {
            self.parts = parts
            self.failAfter = failAfter
            self.pauseAfter = pauseAfter
        }

        func bodyStarted() {}

        func bodyDemanded() {
            guard let stream else { return }
            let next = sent.withLock { $0.parts }
            if let failAfter, next == failAfter {
                stream.finish(.upstreamUnavailable("The client left mid-body."))
                return
            }
            if let pauseAfter, next == pauseAfter { return }
            guard next < parts.count else {
                stream.finish(nil)
                return
            }
            sent.withLock { $0.parts += 1 }
            _ = stream.yield(parts[next])
        }

        func bodyCancelled() {
            sent.withLock { $0.cancelled = true }
        }
    }

    func withTransport<T>(_ body: (PooledHTTP1Transport, any EventLoop) async throws -> T) async throws -> T {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let transport = PooledHTTP1Transport(options: TransportOptions(connectTimeout: .seconds(10)), eventLoopGroup: group)
        let result: Result<T, any Error>
        do {
            result = .success(try await body(transport, group.next()))
        } catch {
            result = .failure(error)
        }
        await transport.shutdown()
        try await group.shutdownGracefully()
        return try result.get()
    }

    func request(_ upstream: ScriptedUpstream, _ producer: Producer, length: Int?, on loop: any EventLoop) -> OutboundRequest {
        let stream = BodyStream(eventLoop: loop, expectedLength: length, source: producer)
        producer.stream = stream
        var request = OutboundRequest(method: .put, endpoint: Endpoint(url: upstream.url)!, target: "/files/1", timeout: .seconds(30))
        request.bodyStream = stream
        return request
    }

    static func parts(_ count: Int, of size: Int) -> [ByteBuffer] {
        // Letters, so that the scripted upstream's text of the request holds them as sent.
        (0..<count).map { index in ByteBuffer(bytes: (0..<size).map { UInt8(ascii: "a") + UInt8(($0 + index) % 26) }) }
    }

    @Test("a body with its Content-Length goes out part by part, byte for byte, and the connection is reused")
    func withLength() async throws {
        let upstream = try await ScriptedUpstream.start { _ in .reply(ScriptedUpstream.ok("{}")) }
        defer { Task { await upstream.stop() } }
        let parts = Self.parts(16, of: 4096)
        let expected = parts.reduce(into: [UInt8]()) { $0 += $1.readableBytesView }
        try await withTransport { transport, loop in
            let producer = Producer(parts: parts)
            let response = try await transport.send(request(upstream, producer, length: expected.count, on: loop))
            #expect(response.status == .ok)
            #expect(producer.partsSent == 16)
            #expect(!producer.cancelled)
            let received = try #require(upstream.received.first)
            #expect(received.text.lowercased().contains("content-length: \(expected.count)\r\n"))
            #expect(!received.text.lowercased().contains("transfer-encoding"))
            let body = Array(received.text.utf8).suffix(expected.count)
            #expect(Array(body) == Array(String(decoding: expected, as: UTF8.self).utf8))
            // The connection went back to the pool whole: the next request reuses it.
            _ = try await transport.send(OutboundRequest(method: .get, endpoint: Endpoint(url: upstream.url)!, target: "/files/1", timeout: .seconds(30)))
            #expect(upstream.connections == 1)
        }
    }

    @Test("the producer stops mid-body: the exchange fails and the upstream connection is closed, never pooled")
    func producerLeaves() async throws {
        let upstream = try await ScriptedUpstream.start { _ in .silence }
        defer { Task { await upstream.stop() } }
        try await withTransport { transport, loop in
            let producer = Producer(parts: Self.parts(4, of: 100), failAfter: 2)
            do {
                let response = try await transport.send(request(upstream, producer, length: 400, on: loop))
                Issue.record("expected a failure, got \(response.status)")
            } catch let error as ProxyError {
                #expect(error.code == .upstreamUnavailable)
            }
            try await eventually("the upstream connection is closed") { upstream.openConnections == 0 }
        }
    }

    @Test("the upstream answers early (413) while the body still arrives: the answer passes, the rest is not sent, the connection closes")
    func earlyAnswer() async throws {
        // Chunked: the scripted upstream sees a head with no Content-Length, so it answers at once.
        let upstream = try await ScriptedUpstream.start { _ in
            .reply("HTTP/1.1 413 Content Too Large\r\nContent-Length: 2\r\n\r\n{}")
        }
        defer { Task { await upstream.stop() } }
        try await withTransport { transport, loop in
            // A client that sent two parts of a long body and pauses.
            let producer = Producer(parts: Self.parts(100, of: 1024), pauseAfter: 2)
            let response = try await transport.send(request(upstream, producer, length: nil, on: loop))
            #expect(response.status.code == 413)
            #expect(String(buffer: response.body) == "{}")
            try await eventually("the producer is told to stop") { producer.cancelled }
            #expect(producer.partsSent <= 2)
            try await eventually("the upstream connection is closed") { upstream.openConnections == 0 }
            let head = try #require(upstream.received.first)
            #expect(head.text.lowercased().contains("transfer-encoding: chunked\r\n"))
        }
    }
}
