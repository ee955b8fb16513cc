import HTTPTypes
import NIOCore
import NIOPosix
import Synchronization
import Testing
import VeneerCore
import VeneerOrigins
import VeneerTestSupport

/// The keep-alive pool, framing and connection-loss rules of the plain-HTTP transport, against
/// an upstream scripted at the byte level.
@Suite("Pooled HTTP/1.1 transport")
struct PooledHTTP1TransportTests {
    /// A transport on a group of its own with one event loop: pools are per loop, so with one
    /// loop the connection counts a test asserts do not depend on which loop a request lands on.
    /// Its connect timeout is generous: a loaded machine may take seconds for a local connection.
    func withTransport<T>(connections: Int? = nil, _ body: (PooledHTTP1Transport) async throws -> T) async throws -> T {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let transport = PooledHTTP1Transport(options: TransportOptions(connectTimeout: .seconds(10), connectionsPerLoop: connections),
                                             eventLoopGroup: group)
        let result: Result<T, any Error>
        do {
            result = .success(try await body(transport))
        } catch {
            result = .failure(error)
        }
        await transport.shutdown()
        try await group.shutdownGracefully()
        return try result.get()
    }

    func request(_ upstream: ScriptedUpstream, _ method: HTTPRequest.Method = .get, _ target: String = "/posts/1",
                 body: String? = nil, timeout: Duration = .seconds(30)) -> OutboundRequest {
        OutboundRequest(method: method, endpoint: Endpoint(url: upstream.url)!, target: target, headers: [.accept: "application/json"],
                        body: body.map { ByteBuffer(string: $0) }, timeout: timeout)
    }

    func expectError(_ code: ProxyError.Code, _ operation: () async throws -> ProxyResponse) async {
        do {
            let response = try await operation()
            Issue.record("expected \(code), got \(response.status)")
        } catch let error as ProxyError {
            #expect(error.code == code, "\(error.message)")
        } catch {
            Issue.record("expected a ProxyError, got \(error)")
        }
    }

    @Test("sequential requests reuse one keep-alive connection")
    func reuse() async throws {
        let upstream = try await ScriptedUpstream.start { received in .reply(ScriptedUpstream.ok(#"{"n":\#(received.indexOnConnection)}"#)) }
        defer { Task { await upstream.stop() } }
        try await withTransport { transport in
            for n in 0..<20 {
                let response = try await transport.send(request(upstream))
                #expect(String(buffer: response.body) == #"{"n":\#(n)}"#)
            }
        }
        #expect(upstream.connections == 1)
        let first = try #require(upstream.received.first)
        #expect(first.text.hasPrefix("GET /posts/1 HTTP/1.1\r\n"))
        #expect(first.text.lowercased().contains("host: 127.0.0.1:\(upstream.port)\r\n"))
    }

    @Test("a reused connection the upstream closed is retried once for GET, never for POST")
    func retryIdempotentOnly() async throws {
        // Every connection answers its first request and closes on the second without answering.
        let upstream = try await ScriptedUpstream.start { received in
            received.indexOnConnection == 0 ? .reply(ScriptedUpstream.ok("{}")) : .close
        }
        defer { Task { await upstream.stop() } }
        try await withTransport { transport in
            _ = try await transport.send(request(upstream))
            let again = try await transport.send(request(upstream))
            #expect(again.status == .ok)
            #expect(upstream.connections == 2)

            // The POST goes out once on the kept connection, is not answered, and is not replayed.
            await expectError(.upstreamUnavailable) {
                try await transport.send(request(upstream, .post, "/posts", body: #"{"title":"t","body":"b"}"#))
            }
            #expect(upstream.received.filter { $0.text.hasPrefix("POST ") }.count == 1)
            #expect(upstream.received.last?.text.hasSuffix(#"{"title":"t","body":"b"}"#) == true)
        }
    }

    @Test("no more connections than the pool size; the rest wait their turn")
    func connectionLimit() async throws {
        let upstream = try await ScriptedUpstream.start { _ in .replyAfter(.milliseconds(50), ScriptedUpstream.ok("{}")) }
        defer { Task { await upstream.stop() } }
        try await withTransport(connections: 2) { transport in
            try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for _ in 0..<10 {
                    group.addTask { try await transport.send(request(upstream)).status }
                }
                for try await status in group { #expect(status == .ok) }
            }
        }
        #expect(upstream.received.count == 10)
        #expect(upstream.maxConcurrentConnections <= 2)
    }

    @Test("a request waiting for a connection still times out on its own deadline")
    func waitingTimesOut() async throws {
        let upstream = try await ScriptedUpstream.start { _ in .silence }
        defer { Task { await upstream.stop() } }
        try await withTransport(connections: 1) { transport in
            let stuck = Task { try await transport.send(request(upstream, timeout: .seconds(60))) }
            try await eventually("the first request holds the one connection") { upstream.received.count == 1 }
            let start = ContinuousClock.now
            await expectError(.upstreamTimeout) { try await transport.send(request(upstream, timeout: .milliseconds(300))) }
            // Its own 300 ms, not the minute of the request ahead of it (seconds of slack for a loaded machine).
            #expect(ContinuousClock.now - start < .seconds(10))
            stuck.cancel()
            _ = await stuck.result
        }
        #expect(upstream.connections == 1)
    }

    @Test("chunked bodies are assembled and the connection is kept")
    func chunked() async throws {
        let upstream = try await ScriptedUpstream.start { _ in
            .reply("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n4\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\n\r\n")
        }
        defer { Task { await upstream.stop() } }
        try await withTransport { transport in
            for _ in 0..<3 {
                let response = try await transport.send(request(upstream))
                #expect(String(buffer: response.body) == #"{"a":1}"#)
                #expect(response.headers[.transferEncoding] == nil)
            }
        }
        #expect(upstream.connections == 1)
    }

    @Test("a body delimited by the close of the connection is read whole, and that connection is not reused")
    func closeDelimited() async throws {
        let upstream = try await ScriptedUpstream.start { _ in .replyAndClose("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end") }
        defer { Task { await upstream.stop() } }
        try await withTransport { transport in
            for _ in 0..<3 {
                let response = try await transport.send(request(upstream))
                #expect(String(buffer: response.body) == "until the end")
            }
        }
        #expect(upstream.connections == 3)
    }

    @Test("HTTP/1.0 and Connection: close answers end their connection")
    func notKeptAlive() async throws {
        let upstream = try await ScriptedUpstream.start { received in
            received.connection % 2 == 0
                ? .reply("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}")
                : .reply("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}")
        }
        defer { Task { await upstream.stop() } }
        try await withTransport { transport in
            for _ in 0..<4 {
                let response = try await transport.send(request(upstream))
                #expect(response.status == .ok)
                #expect(response.headers[.connection] == nil)
            }
        }
        #expect(upstream.connections == 4)
        #expect(upstream.received.allSatisfy { $0.indexOnConnection == 0 })
    }

    @Test("HEAD answers carry no body even with a Content-Length, and the connection goes on")
    func head() async throws {
        let upstream = try await ScriptedUpstream.start { received in
            received.text.hasPrefix("HEAD ")
                ? .reply("HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n")
                : .reply(ScriptedUpstream.ok(#"{"a":1}"#))
        }
        defer { Task { await upstream.stop() } }
        try await withTransport { transport in
            let head = try await transport.send(request(upstream, .head))
            #expect(head.status == .ok && head.body.readableBytes == 0)
            // The length the GET answer would have goes on to the client.
            #expect(head.headers[.contentLength] == "7")
            let get = try await transport.send(request(upstream))
            #expect(String(buffer: get.body) == #"{"a":1}"#)
        }
        #expect(upstream.connections == 1)
    }

    @Test("a malformed or cut-off response is upstream_unavailable and its connection is dropped")
    func broken() async throws {
        // Scripted by target, not by connection: on a loaded run the first request's deadline
        // once passed while its connection was still being opened, and that connection (which
        // then goes on for the next request) served the second one the first one's answer.
        let upstream = try await ScriptedUpstream.start { received in
            if received.text.hasPrefix("GET /posts/1 ") {
                .reply("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"cut")
            } else if received.text.hasPrefix("GET /posts/2 ") {
                .reply("NOT HTTP AT ALL\r\n\r\n")
            } else {
                .replyAndClose("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"cut")
            }
        }
        defer { Task { await upstream.stop() } }
        try await withTransport { transport in
            // A body that never completes runs into the deadline; one cut by a close fails at once.
            await expectError(.upstreamTimeout) { try await transport.send(request(upstream, .get, "/posts/1", timeout: .seconds(1))) }
            await expectError(.upstreamUnavailable) { try await transport.send(request(upstream, .get, "/posts/2")) }
            await expectError(.upstreamUnavailable) { try await transport.send(request(upstream, .get, "/posts/3")) }
        }
        #expect(upstream.connections == 3)
    }

    @Test("an idle connection the upstream closed is not used again")
    func idleClosedByPeer() async throws {
        let upstream = try await ScriptedUpstream.start { _ in .replyAndClose(ScriptedUpstream.ok("{}")) }
        defer { Task { await upstream.stop() } }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let transport = PooledHTTP1Transport(options: TransportOptions(connectTimeout: .seconds(10)), eventLoopGroup: group)
        // The upstream's close completed: its end-of-stream waits on the transport's socket. A
        // task scheduled on the transport's loop for a moment later runs after the loop has
        // looked at its sockets again (a request handed over at once could be taken before).
        func closeSeen() async throws {
            try await eventually("the upstream closed the connection") { upstream.openConnections == 0 }
            try await group.next().scheduleTask(in: .milliseconds(100)) {}.futureResult.get()
        }
        do {
            for _ in 0..<3 {
                _ = try await transport.send(request(upstream))
                try await closeSeen()
                _ = try await transport.send(request(upstream, .post, "/posts", body: "{}"))
                try await closeSeen()
            }
        } catch {
            Issue.record(error)
        }
        await transport.shutdown()
        try await group.shutdownGracefully()
        // Each POST found its kept connection gone and opened a new one instead of failing.
        #expect(upstream.connections == 6)
        #expect(upstream.received.count == 6)
    }

    @Test("a request in flight at shutdown fails at once instead of waiting for its answer")
    func shutdownInFlight() async throws {
        let upstream = try await ScriptedUpstream.start { _ in .replyAfter(.seconds(60), ScriptedUpstream.ok("{}")) }
        defer { Task { await upstream.stop() } }
        try await withTransport { transport in
            let inFlight = Task { try await transport.send(request(upstream, timeout: .seconds(90))) }
            try await eventually("the upstream has the request") { upstream.received.count == 1 }
            let start = ContinuousClock.now
            await transport.shutdown()
            await expectError(.upstreamUnavailable) { try await inFlight.value }
            // At once, not after the upstream's minute (seconds of slack for a loaded machine).
            #expect(ContinuousClock.now - start < .seconds(10))
        }
    }

    @Test("a cancelled caller's request fails, and its connection is not used again")
    func cancelled() async throws {
        let upstream = try await ScriptedUpstream.start { received in received.connection == 0 ? .silence : .reply(ScriptedUpstream.ok("{}")) }
        defer { Task { await upstream.stop() } }
        try await withTransport { transport in
            let stuck = Task { try await transport.send(request(upstream, timeout: .seconds(30))) }
            try await eventually("the upstream has the request") { upstream.received.count == 1 }
            stuck.cancel()
            do {
                _ = try await stuck.value
                Issue.record("a cancelled request has no answer")
            } catch let error as ProxyError {
                #expect(error.code == .upstreamUnavailable && error.message.contains("cancelled"), "\(error.message)")
            }
            let next = try await transport.send(request(upstream))
            #expect(next.status == .ok)
        }
        #expect(upstream.connections == 2)
    }

    @Test("after shutdown requests fail instead of hanging")
    func afterShutdown() async throws {
        let upstream = try await ScriptedUpstream.start { _ in .reply(ScriptedUpstream.ok("{}")) }
        defer { Task { await upstream.stop() } }
        try await withTransport { transport in
            _ = try await transport.send(request(upstream))
            await transport.shutdown()
            await expectError(.upstreamUnavailable) { try await transport.send(request(upstream)) }
        }
    }
}

/// Streamed answers on the pooled transport: nobody may keep a connection taken by dropping one.
@Suite("Pooled HTTP/1.1 transport: streamed answers")
struct PooledHTTP1StreamingTests {
    @Test("an answer dropped without being read or discarded: its connection is closed after body_timeout, not kept taken")
    func droppedUnread() async throws {
        let upstream = try await ScriptedUpstream.start { _ in
            .reply("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        }
        defer { Task { await upstream.stop() } }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let transport = PooledHTTP1Transport(options: TransportOptions(connectTimeout: .seconds(10)), eventLoopGroup: group)
        var request = OutboundRequest(method: .get, endpoint: Endpoint(url: upstream.url)!, target: "/posts/1", timeout: .seconds(30))
        request.streamThreshold = 1 << 10
        request.bodyTimeout = .milliseconds(200)
        let response = try await transport.send(request)
        #expect(response.isStreamed)
        _ = response  // dropped: never read, never discarded
        try await eventually("the connection was closed (\(upstream.openConnections) open)") { upstream.openConnections == 0 }
        await transport.shutdown()
        try await group.shutdownGracefully()
    }

    @Test("an answer read part by part passes whole, and its connection serves the next request")
    func readWhole() async throws {
        let upstream = try await ScriptedUpstream.start { _ in
            .reply("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n6\r\nsecond\r\n0\r\n\r\n")
        }
        defer { Task { await upstream.stop() } }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let transport = PooledHTTP1Transport(options: TransportOptions(connectTimeout: .seconds(10)), eventLoopGroup: group)
        var request = OutboundRequest(method: .get, endpoint: Endpoint(url: upstream.url)!, target: "/posts/1", timeout: .seconds(30))
        request.streamThreshold = 1 << 10
        for _ in 0..<2 {
            let response = try await transport.send(request)
            #expect(String(buffer: try await response.collected(upTo: 100).body) == "firstsecond")
        }
        #expect(upstream.connections == 1, "reused")
        await transport.shutdown()
        try await group.shutdownGracefully()
    }
}
