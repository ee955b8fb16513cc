import Testing
import NIOCore
import NIOPosix
import VeneerCore
import VeneerTestSupport
import VeneerOrigins

/// The AsyncHTTPClient transport (`https://` upstreams) streams as the pooled one does: answers
/// of unknown length or over the threshold come as a BodyStream, read only as they are wanted,
/// with body_timeout as the longest pause and for an answer nobody starts reading.
@Suite("AsyncHTTPClient transport: streamed answers", .timeLimit(.minutes(1)))
struct AsyncHTTPClientStreamingTests {
    static func request(_ upstream: ScriptedUpstream, bodyTimeout: Duration = .seconds(30)) -> OutboundRequest {
        var request = OutboundRequest(method: .get, endpoint: Endpoint(url: upstream.url)!, target: "/posts/1",
                                      timeout: .seconds(30), maxResponseBodySize: 8)
        request.streamThreshold = 4
        request.bodyTimeout = bodyTimeout
        return request
    }

    /// Runs `body` with a transport that is shut down whatever `body` does (AsyncHTTPClient
    /// traps on a client dropped without it).
    static func withTransport(_ body: (AsyncHTTPClientTransport) async throws -> Void) async throws {
        let transport = AsyncHTTPClientTransport(options: TransportOptions(connectTimeout: .seconds(10)))
        do {
            try await body(transport)
        } catch {
            try await transport.shutdown()
            throw error
        }
        try await transport.shutdown()
    }

    @Test("a chunked answer over response_body streams and passes whole; a short one with a length stays whole")
    func passesWhole() async throws {
        let upstream = try await ScriptedUpstream.start { _ in
            .reply("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n6\r\nsecond\r\n0\r\n\r\n")
        }
        defer { Task { await upstream.stop() } }
        try await Self.withTransport { transport in
            let response = try await transport.send(Self.request(upstream))
            #expect(response.isStreamed)
            #expect(String(buffer: try await response.collected(upTo: 100).body) == "firstsecond",
                    "11 bytes pass although response_body is 8: only what is buffered is limited")
        }

        let short = try await ScriptedUpstream.start { _ in .reply("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc") }
        defer { Task { await short.stop() } }
        try await Self.withTransport { transport in
            let answer = try await transport.send(Self.request(short))
            #expect(!answer.isStreamed && String(buffer: answer.body) == "abc")
        }
    }

    @Test("an upstream that pauses longer than body_timeout cuts the stream with upstream_timeout and its connection closes")
    func pauseCuts() async throws {
        let upstream = try await ScriptedUpstream.start { _ in
            .reply("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        }
        defer { Task { await upstream.stop() } }
        try await Self.withTransport { transport in
            let response = try await transport.send(Self.request(upstream, bodyTimeout: .milliseconds(300)))
            #expect(response.isStreamed)
            await #expect {
                _ = try await response.collected(upTo: 100)
            } throws: { error in
                (error as? ProxyError)?.code == .upstreamTimeout
            }
            try await eventually("the connection was closed (\(upstream.openConnections) open)") { upstream.openConnections == 0 }
        }
    }

    @Test("an answer nobody starts reading is cut after body_timeout: its connection is not kept")
    func droppedUnread() async throws {
        let upstream = try await ScriptedUpstream.start { _ in
            .reply("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        }
        defer { Task { await upstream.stop() } }
        try await Self.withTransport { transport in
            let response = try await transport.send(Self.request(upstream, bodyTimeout: .milliseconds(200)))
            #expect(response.isStreamed)
            _ = response  // dropped: never read, never discarded
            try await eventually("the connection was closed (\(upstream.openConnections) open)") { upstream.openConnections == 0 }
        }
    }

    @Test("an answer read whole (a length under the threshold) that pauses longer than body_timeout fails with upstream_timeout; its connection closes")
    func wholePauseCuts() async throws {
        let upstream = try await ScriptedUpstream.start { _ in .reply("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\na") }
        defer { Task { await upstream.stop() } }
        try await Self.withTransport { transport in
            await #expect {
                _ = try await transport.send(Self.request(upstream, bodyTimeout: .milliseconds(300)))
            } throws: { error in
                (error as? ProxyError)?.code == .upstreamTimeout
            }
            try await eventually("the connection was closed (\(upstream.openConnections) open)") { upstream.openConnections == 0 }
        }
    }

    @Test("limits.buffered: an answer read whole reserves its length and holds it; one with no room streams instead")
    func wholeReserves() async throws {
        let upstream = try await ScriptedUpstream.start { _ in .reply("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc") }
        defer { Task { await upstream.stop() } }
        let budget = BufferBudget(limit: 5)
        try await Self.withTransport { transport in
            var request = Self.request(upstream)
            request.buffers = budget
            var first: ProxyResponse? = try await transport.send(request)
            #expect(first?.isStreamed == false && first?.reservation?.held == 3 && budget.inUse == 3)
            let second = try await transport.send(request)
            #expect(second.isStreamed && budget.inUse == 3, "no room beside the first: it streams")
            #expect(String(buffer: try await second.collected(upTo: 100).body) == "abc")
            first = nil
            #expect(budget.inUse == 0)
            _ = first
        }
    }
}
