import HTTPTypes
import NIOCore
import NIOPosix
import Testing
import VeneerCore
import VeneerOrigins
import VeneerTestSupport

/// Both transports mark a failure as "never sent" only when no byte of the request can have
/// reached the peer: what lets auth_refresh send a refresh token again (and nothing else).
@Suite("Transports: a request that never reached its peer")
struct RequestNeverSentTests {
    func post(_ url: String, timeout: Duration = .seconds(5)) -> OutboundRequest {
        OutboundRequest(method: .post, endpoint: Endpoint(url: url)!, target: "/oauth/token",
                        headers: [.contentType: "application/x-www-form-urlencoded"],
                        body: ByteBuffer(string: "grant_type=refresh_token&refresh_token=rt-0"), timeout: timeout)
    }

    /// The error `send` threw (a ProxyError), or nil when it answered.
    func failure(_ transport: any HTTPTransport, _ request: OutboundRequest) async -> ProxyError? {
        do {
            _ = try await transport.send(request)
            Issue.record("expected a failure")
            return nil
        } catch let error as ProxyError {
            return error
        } catch {
            Issue.record("expected a ProxyError, got \(error)")
            return nil
        }
    }

    func withTransports<T>(_ body: (_ pooled: PooledHTTP1Transport, _ client: AsyncHTTPClientTransport) async throws -> T) async throws -> T {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let options = TransportOptions(connectTimeout: .milliseconds(500), connectionsPerLoop: 1)
        let pooled = PooledHTTP1Transport(options: options, eventLoopGroup: group)
        let client = AsyncHTTPClientTransport(options: options, eventLoopGroup: group)
        let result: Result<T, any Error>
        do {
            result = .success(try await body(pooled, client))
        } catch {
            result = .failure(error)
        }
        await pooled.shutdown()
        try? await client.shutdown()
        try await group.shutdownGracefully()
        return try result.get()
    }

    @Test("a refused connection never sent anything, through either transport")
    func refused() async throws {
        try await withTransports { pooled, client in
            try await withRefusingPort { port in
                #expect(await failure(pooled, post("http://127.0.0.1:\(port)"))?.requestNeverSent == true)
                // AsyncHTTPClient retries the connection until the request's deadline.
                #expect(await failure(client, post("http://127.0.0.1:\(port)", timeout: .seconds(1)))?.requestNeverSent == true)
            }
        }
    }

    @Test("a failed TLS handshake never sent anything")
    func tlsHandshake() async throws {
        // A plain HTTP server answers the ClientHello with an HTTP error: the handshake fails.
        try await withTestUpstream({ _ in .json("{}") }) { (upstream: TestUpstream) async throws in
            try await withTransports { _, client in
                let error = await failure(client, post("https://127.0.0.1:\(upstream.port)", timeout: .seconds(2)))
                #expect(error?.requestNeverSent == true, "\(error?.message ?? "")")
                #expect(upstream.count == 0)
            }
        }
    }

    @Test("a request written and then met by a close, a reset or silence may have been received: never marked")
    func maybeSent() async throws {
        let closing = try await ScriptedUpstream.start { _ in .close }
        let silent = try await ScriptedUpstream.start { _ in .silence }
        try await withTransports { pooled, client in
            #expect(await failure(pooled, post(closing.url))?.requestNeverSent == false)
            #expect(await failure(client, post(closing.url))?.requestNeverSent == false)
            let timedOut = await failure(pooled, post(silent.url, timeout: .milliseconds(300)))
            #expect(timedOut?.code == .upstreamTimeout && timedOut?.requestNeverSent == false)
            let clientTimedOut = await failure(client, post(silent.url, timeout: .milliseconds(300)))
            #expect(clientTimedOut?.code == .upstreamTimeout && clientTimedOut?.requestNeverSent == false)
        }
        // Both were written (neither failure is marked never sent): the upstream reads them in
        // its own time (a loaded run's shared event loops had read one when the test looked).
        try await eventually("the closing upstream received both requests (\(closing.received.count))") { closing.received.count == 2 }
        await closing.stop()
        await silent.stop()
    }

    @Test("a request whose deadline passes while it waits for a pooled connection never sent anything")
    func deadlineInQueue() async throws {
        let silent = try await ScriptedUpstream.start { _ in .silence }
        try await withTransports { pooled, _ in
            // The one connection of the pool is taken by a request that never gets an answer (for
            // 10 s: with 2 s, a loaded run queued the second only after the first had timed out
            // and freed the connection, and the second was sent).
            async let first = failure(pooled, post(silent.url, timeout: .seconds(10)))
            try await eventually("the first request holds the one connection") { !silent.received.isEmpty }
            let queued = await failure(pooled, post(silent.url, timeout: .milliseconds(200)))
            #expect(queued?.code == .upstreamTimeout && queued?.requestNeverSent == true)
            #expect(await first?.requestNeverSent == false)
        }
        #expect(silent.received.count == 1)
        await silent.stop()
    }
}
