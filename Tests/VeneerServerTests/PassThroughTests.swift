import HTTPTypes
import NIOCore
import NIOPosix
import Synchronization
import Testing
@testable import VeneerServer
import VeneerCore
import VeneerTestSupport

@Suite("pass-through without a task")
struct PassThroughTests {
    @Test("an upstream chain is answered by callback on the connection's loop, stamped, logged, its generation left; off the loop it is not started")
    func withoutTask() async throws {
        try await withTestUpstream({ _ in .json(#"{"id":1}"#, headers: [("X-Request-Id", "theirs")]) }) { (upstream: TestUpstream) async throws in
            let yaml = "environments: {development: {origin: {upstream: {url: \"\(upstream.url)\"}}, chain: [latency_log]}}"
            try await withVeneer(yaml: yaml) { (veneer: RunningVeneer) async throws in
                let chain = veneer.chain
                let records = Mutex<[RequestRecord]>([])
                let edge = ProxyEdge(chain: chain, admin: NoAdmin(), logger: quietLogger(), adminOnly: false, servesAdmin: true)
                @Sendable func begin() throws -> ProxyEdge.Pending {
                    let record = RequestRecord()
                    records.withLock { $0.append(record) }
                    guard let pending = edge.begin(method: .get, target: "/posts/1", fields: [.xRequestID: "req-9"],
                                                   body: .complete(ByteBuffer()), client: ClientAddress("127.0.0.1"), record: record).waiting() else {
                        throw CancellationError()
                    }
                    return pending
                }

                // Off any event loop nothing starts and nothing changes: the task path follows.
                guard let offLoop = edge.completeWithoutTask(try begin(), then: { _ in Issue.record("answered off the loop") }) else {
                    throw CancellationError()
                }
                #expect(chain.generation.requestsInFlight == 1)
                let byTask = await edge.complete(offLoop)
                #expect(byTask.status == .ok && chain.generation.requestsInFlight == 0)

                let loop = veneer.instance.configuration.eventLoopGroup.next()
                let response: ProxyResponse = try await withCheckedThrowingContinuation { continuation in
                    loop.execute {
                        do {
                            let declined = edge.completeWithoutTask(try begin()) { response in
                                #expect(loop.inEventLoop)
                                continuation.resume(returning: response)
                            }
                            if declined != nil { continuation.resume(throwing: CancellationError()) }
                        } catch {
                            continuation.resume(throwing: error)
                        }
                    }
                }
                #expect(response.status == .ok && String(buffer: response.body) == #"{"id":1}"#)
                #expect(response.headers[values: .xRequestID] == ["req-9"], "the edge's id replaces the upstream's")
                #expect(chain.generation.requestsInFlight == 0)
                #expect(upstream.requests.count == 2 && upstream.requests.allSatisfy { $0.header("x-request-id") == "req-9" })
                let metrics = try await veneer.request("GET", "/-/metrics").text
                #expect(metrics.contains(#"veneer_request_duration_seconds_count{label="0",method="GET",route="/posts/{id}",status="200"} 2"#))
                let entries = records.withLock { $0 }.map(\.entries)
                #expect(entries.count == 2 && entries.allSatisfy { $0.map(\.name) == ["upstream"] && $0.first?.duration != nil },
                        "the origin's time, by task and by callback")
            }
        }
    }

    @Test("with one upstream connection per loop, answers by callback serve two clients' pipelined requests on it, one after the other, in order")
    func oneConnectionReentrant() async throws {
        let upstream = try await ScriptedUpstream.start { received in
            .reply(ScriptedUpstream.ok(#"{"n":\#(received.indexOnConnection)}"#))
        }
        defer { Task { await upstream.stop() } }
        let yaml = "environments: {development: {origin: {upstream: {url: \"\(upstream.url)\", connections: 1}}, chain: [latency_log]}}"
        // One event loop: both clients' requests share its pool of one connection.
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { Task { try await group.shutdownGracefully() } }
        try await withVeneer(yaml: yaml, eventLoopGroup: group) { (veneer: RunningVeneer) async throws in
            let clients = [try await RawConnection.connect(port: veneer.port), try await RawConnection.connect(port: veneer.port)]
            defer { for client in clients { client.close() } }
            for client in clients {
                try await client.send(String(repeating: "GET /posts/1 HTTP/1.1\r\nHost: \(veneer.host)\r\n\r\n", count: 3))
            }
            var seen: [Int] = []
            for client in clients {
                let answers = try await client.responses(3)
                #expect(answers.map(\.status) == [200, 200, 200])
                let numbers = answers.compactMap { $0.json?["n"] as? Int }
                #expect(numbers == numbers.sorted(), "each client's answers in order")
                seen += numbers
            }
            #expect(seen.sorted() == Array(0..<6), "six exchanges, one after the other, on the one connection")
            #expect(upstream.connections == 1)
        }
    }
}
