import CoreMetrics
import HTTPTypes
import NIOCore
import Synchronization
import Testing
import VeneerConfig
import VeneerCore
import VeneerDecorators
import VeneerRuntime
@testable import VeneerServer
import VeneerTestSupport

/// Every request holds a lease on the generation it entered, and every lease ends, once,
/// however the request ends; a retired generation drains when its last lease ends.
@Suite("Generation leases and drain", .timeLimit(.minutes(1)))
struct GenerationLeaseTests {
    func begin(_ edge: ProxyEdge, _ target: String = "/posts/1") -> ProxyEdge.Start {
        edge.begin(method: .get, target: target, fields: [:], body: .complete(ByteBuffer()), client: ClientAddress("127.0.0.1"))
    }

    /// An origin that starts by callback and keeps the callback until told to answer.
    final class HeldCallbackOrigin: CallbackAnswering {
        let held = Mutex<(@Sendable (Result<ProxyResponse, any Error>) -> Void)?>(nil)

        var startsWithoutTask: Bool { true }

        func startAnswer(_ request: ProxyRequest, then done: @escaping @Sendable (Result<ProxyResponse, any Error>) -> Void) -> Bool {
            held.withLock { $0 = done }
            return true
        }

        func handle(_ request: ProxyRequest) async throws -> ProxyResponse { .json(.ok, ByteBuffer(string: "{}")) }

        /// Answers the request held, and lets the callback go.
        func answer() {
            let done = held.withLock { slot in defer { slot = nil }; return slot }
            done?(.success(.json(.ok, ByteBuffer(string: "{}"))))
        }
    }

    @Test("answers given at once, a refusal and a fresh hit, end their lease at once")
    func atOnce() async throws {
        let origin = RecordingHandler { _ in .json(.ok, ByteBuffer(string: "{}"), headers: [.cacheControl: "max-age=60"]) }
        let cache = CacheDecorator.make(inner: origin, options: CacheOptions(), metrics: NOOPMetricsHandler.instance)
        let chain = FixedChain([cache, origin])
        let edge = ProxyEdge.serving(chain)
        #expect(begin(edge, "/nothing").answered?.status == .notFound)
        #expect(chain.current.requestsInFlight == 0)
        _ = await edge.answer("/posts/1", client: nil)
        #expect(begin(edge).answered?.headers[.cacheStatus]?.hasPrefix("veneer; hit") == true)
        #expect(chain.current.requestsInFlight == 0)
    }

    @Test("by callback: the lease is held until the callback has answered, then ends")
    func byCallback() async throws {
        let origin = HeldCallbackOrigin()
        let chain = FixedChain([origin])
        let edge = ProxyEdge.serving(chain)
        let answered = Mutex(0)
        guard let pending = begin(edge).waiting() else { throw CancellationError() }
        let started = edge.completeWithoutTask(pending, then: { _ in answered.withLock { $0 += 1 } }) == nil
        #expect(started && chain.current.requestsInFlight == 1)
        origin.answer()
        #expect(answered.withLock { $0 } == 1 && chain.current.requestsInFlight == 0)
    }

    @Test("a declined start goes on in a task under the lease it had: a retired generation does not drain in between")
    func declinedHandover() async throws {
        let chain = FixedChain([EdgeTests.CallbackOrigin(declines: true)])
        let edge = ProxyEdge.serving(chain)
        guard let pending = begin(edge).waiting() else { throw CancellationError() }
        chain.current.retire()
        guard let declined = edge.completeWithoutTask(pending, then: { _ in Issue.record("declined") }) else {
            throw CancellationError()
        }
        #expect(!chain.current.isDrained && chain.current.requestsInFlight == 1)
        #expect(await edge.complete(declined).status == .ok)
        #expect(chain.current.isDrained)
    }

    @Test("a chain that throws, and a request whose task is cancelled, end their leases")
    func thrownAndCancelled() async throws {
        let failing = FixedChain([RecordingHandler { _ in throw ProxyError.upstreamUnavailable("down") }])
        #expect(await ProxyEdge.serving(failing).answer("/posts/1", client: nil).status == .badGateway)
        #expect(failing.current.requestsInFlight == 0)

        let entered = Signals<Void>()
        let slow = FixedChain([RecordingHandler { _ in
            entered.send(())
            try await Task.sleep(for: .seconds(600))  // a request that never ends: its task is cancelled below
            return .json(.ok, ByteBuffer(string: "{}"))
        }])
        let edge = ProxyEdge.serving(slow)
        let request = Task { await edge.answer("/posts/1", client: nil) }
        _ = await entered.next()
        #expect(slow.current.requestsInFlight == 1)
        request.cancel()
        #expect(await request.value.status == .internalServerError)
        slow.current.retire()
        await slow.current.drained()
    }

    @Test("drained() returns at once for a retired idle generation, and waits for the last lease of a busy one")
    func drain() async throws {
        let chain = FixedChain([RecordingHandler()])
        let idle = ServingChain(plan: chain.current.plan, resources: [.posts], requestBodyLimit: 1, access: .testListener)
        idle.retire()
        await idle.drained()
        #expect(idle.isDrained)

        let lease = chain.lease()
        chain.current.retire()
        chain.current.retire()  // idempotent: the hold of being current is dropped once
        let order = Mutex<[String]>([])
        let waiter = Task.immediate {
            await chain.current.drained()
            order.withLock { $0.append("drained") }
        }
        #expect(!chain.current.isDrained && chain.current.requestsInFlight == 1)
        order.withLock { $0.append("last lease ends") }
        lease.end()
        await waiter.value
        #expect(order.withLock { $0 } == ["last lease ends", "drained"])
    }

    @Test("through a connection: a request whose client closed the connection mid-request keeps its generation until the chain is done")
    func connectionClosedMidRequest() async throws {
        let entered = Signals<Void>()
        let gate = Latch()
        var registry = Registry.standard
        registry.register(DecoratorFactory(name: "hold", summary: "waits at a gate", options: [], decode: { _, _ in true },
                                           make: { _, inner, _ in
                                               RecordingHandler { request in
                                                   entered.send(())
                                                   await gate.wait()
                                                   return try await inner.handle(request)
                                               }
                                           }))
        try await withVeneer(yaml: "environments: {development: {origin: {mock: {}}, chain: [hold]}}", registry: registry) { (veneer: RunningVeneer) async throws in
            let connection = try await RawConnection.connect(port: veneer.port)
            try await connection.send("GET /posts HTTP/1.1\r\nHost: \(veneer.host)\r\n\r\n")
            _ = await entered.next()
            connection.close()
            let old = veneer.chain.generation
            _ = try await veneer.instance.reload().get()
            #expect(!old.serving.isDrained && old.requestsInFlight == 1)
            gate.open()
            await old.serving.drained()
            #expect(old.requestsInFlight == 0)
        }
    }
}
