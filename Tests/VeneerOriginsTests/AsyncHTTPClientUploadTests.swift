import NIOCore
import NIOPosix
import Synchronization
import Testing
import VeneerCore
import VeneerOrigins
import VeneerTestSupport

/// The AsyncHTTPClient transport (`https://` upstreams), over plain http as
/// AsyncHTTPClientStreamingTests drives it: a request body that streams goes out part by part as
/// AsyncHTTPClient writes, never read ahead of the upstream, and whatever its size (not bounded
/// by `response_body`, nothing taken from `limits.buffered`).
@Suite("AsyncHTTPClient transport: streamed uploads", .timeLimit(.minutes(2)))
struct AsyncHTTPClientUploadTests {
    /// The client's side of a body of ``StreamingUpstream/byte(at:)``'s pattern: one part of
    /// 64 KB made each time one is asked for (nothing held beyond it), counting what was pulled.
    final class PatternProducer: BodyStream.Source, @unchecked Sendable {
        let size: Int
        var stream: BodyStream?
        private let state = Mutex((pulled: 0, cancelled: false))
        /// Bytes handed to the stream so far.
        var pulled: Int { state.withLock { $0.pulled } }
        var cancelled: Bool { state.withLock { $0.cancelled } }

        init(size: Int) { self.size = size }

        func bodyStarted() {}

        func bodyDemanded() {
            guard let stream else { return }
            let offset = state.withLock { $0.pulled }
            guard offset < size else {
                stream.finish(nil)
                return
            }
            let count = min(64 << 10, size - offset)
            var part = ByteBuffer()
            part.writeBytes((offset..<offset + count).map(StreamingUpstream.byte(at:)))
            state.withLock { $0.pulled += count }
            _ = stream.yield(part)
        }

        func bodyCancelled() { state.withLock { $0.cancelled = true } }
    }

    static func request(_ upstream: UploadUpstream, _ target: String, _ producer: PatternProducer, length: Int?) -> OutboundRequest {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let stream = BodyStream(eventLoop: loop, expectedLength: length, source: producer)
        producer.stream = stream
        // response_body stays at its default (16 MB): the body passes whatever its size.
        // The deadline is not what these tests look at: generous, as tens of MB made byte by byte
        // (debug build) and hashed took longer than 60 s on a loaded parallel run.
        var request = OutboundRequest(method: .put, endpoint: Endpoint(url: upstream.url)!, target: target, timeout: .seconds(300))
        request.bodyStream = stream
        request.buffers = BufferBudget(limit: 1 << 20)
        return request
    }

    @Test("a 24 MB body with its length passes byte for byte (SHA-256 at the upstream), over response_body, nothing buffered", arguments: [true, false])
    func passesWhole(known: Bool) async throws {
        let upstream = try await UploadUpstream.start()
        defer { Task { await upstream.stop() } }
        let size = 24 << 20
        try await AsyncHTTPClientStreamingTests.withTransport { transport in
            let producer = PatternProducer(size: size)
            let request = Self.request(upstream, "/uploads/1", producer, length: known ? size : nil)
            let response = try await transport.send(request)
            #expect(response.status.code == 200)
            let received = try #require(upstream.received.first)
            #expect(received.bytes == size && received.sha256 == UploadUpstream.patternSHA256(size))
            #expect(received.chunked == !known, known ? "with its Content-Length" : "chunked, its length unknown")
            #expect(request.buffers?.inUse == response.body.readableBytes, "nothing of it reserved from limits.buffered (the answer is)")
        }
    }

    @Test("an upstream that does not read: the body is pulled only as AsyncHTTPClient writes (the sockets' buffers), not read ahead; released, it arrives whole")
    func notReadAhead() async throws {
        let upstream = try await UploadUpstream.start()
        defer { Task { await upstream.stop() } }
        let size = 40 << 20
        try await AsyncHTTPClientStreamingTests.withTransport { transport in
            let producer = PatternProducer(size: size)
            let request = Self.request(upstream, "/uploads/stall", producer, length: size)
            async let answer = transport.send(request)
            _ = try await eventually("the upload reached the upstream") { upstream.heads == 1 }
            // The sockets' buffers fill and stay full: what was pulled stops growing.
            var pulled: [Int] = []
            _ = try await eventually("the pulling stopped (\(pulled.suffix(3)))") {
                pulled.append(producer.pulled)
                return pulled.count >= 3 && pulled.suffix(3).max()! == pulled.suffix(3).min()!
            }
            #expect(producer.pulled < size / 2, "pulled \(producer.pulled >> 20) MiB of \(size >> 20) before the upstream read a byte")
            upstream.release()
            let response = try await answer
            #expect(response.status.code == 200)
            #expect(upstream.received.map(\.sha256) == [UploadUpstream.patternSHA256(size)])
        }
    }
}
