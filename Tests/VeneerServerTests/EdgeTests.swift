import HTTPTypes
import NIOCore
import CoreMetrics
import Synchronization
import Testing
import VeneerCore
import VeneerDecorators
import VeneerHTTP1
@testable import VeneerServer
import VeneerTestSupport

/// The edge follows the chain's plan, asking the chain once per request.
@Suite("The edge and the chain's plan")
struct EdgeTests {
    /// Passes requests on to its inner handler, counting how it was asked.
    final class Counting: ImmediateAnswering {
        let inner: any ImmediateAnswering
        let immediate = Atomic<Int>(0)
        let handled = Atomic<Int>(0)

        init(_ inner: any ImmediateAnswering) {
            self.inner = inner
        }

        var answersImmediately: Bool { false }

        func answerImmediately(_ request: ProxyRequest) -> ImmediateAnswer {
            immediate.wrappingAdd(1, ordering: .relaxed)
            return inner.answerImmediately(request)
        }

        func handle(_ request: ProxyRequest) async throws -> ProxyResponse {
            handled.wrappingAdd(1, ordering: .relaxed)
            return try await inner.handle(request)
        }

        var counts: (immediate: Int, handled: Int) { (immediate.load(ordering: .relaxed), handled.load(ordering: .relaxed)) }
    }

    /// An origin that answers by callback at once (or declines, when told), counting both forms.
    final class CallbackOrigin: CallbackAnswering {
        let declines: Bool
        let started = Atomic<Int>(0)
        let handled = Atomic<Int>(0)

        init(declines: Bool) {
            self.declines = declines
        }

        var startsWithoutTask: Bool { true }

        func startAnswer(_ request: ProxyRequest, then done: @escaping @Sendable (Result<ProxyResponse, any Error>) -> Void) -> Bool {
            started.wrappingAdd(1, ordering: .relaxed)
            guard !declines else { return false }
            done(.success(.json(.ok, ByteBuffer(string: "{}"))))
            return true
        }

        func handle(_ request: ProxyRequest) async throws -> ProxyResponse {
            handled.wrappingAdd(1, ordering: .relaxed)
            return .json(.ok, ByteBuffer(string: "{}"))
        }
    }

    func begin(_ edge: ProxyEdge, _ target: String = "/posts/1") -> ProxyEdge.Start {
        edge.begin(method: .get, target: target, fields: [.xRequestID: "req-1"], body: .complete(ByteBuffer()), client: ClientAddress("127.0.0.1"))
    }

    @Test("a miss walks the chain once: one immediate ask, carried on into the fetch, one upstream request; a hit then needs no wait")
    func missWalksOnce() async throws {
        let origin = RecordingHandler { _ in .json(.ok, ByteBuffer(string: #"{"id":1}"#), headers: [.cacheControl: "max-age=60"]) }
        let cache = CacheDecorator.make(inner: origin, options: CacheOptions(), metrics: NOOPMetricsHandler.instance)
        let counting = Counting(cache)
        let chain = FixedChain([counting, cache, origin])
        let edge = ProxyEdge.serving(chain)
        guard let pending = begin(edge).waiting() else {
            Issue.record("a miss was answered without the origin")
            return
        }
        guard let pending = edge.completeWithoutTask(pending, then: { _ in Issue.record("an immediate plan started a callback") }) else {
            Issue.record("an immediate plan started a callback")
            return
        }
        let missed = await edge.complete(pending)
        #expect(missed.headers[.cacheStatus] == "veneer; fwd=uri-miss; fwd-status=200; stored")
        #expect(counting.counts == (1, 0), "the chain was asked once, and not again through handle")
        #expect(origin.count == 1 && chain.current.requestsInFlight == 0)
        guard let hit = begin(edge).answered else {
            Issue.record("a fresh hit waited")
            return
        }
        #expect(hit.headers[.cacheStatus]?.hasPrefix("veneer; hit") == true && hit.headers[.xRequestID] == "req-1")
        #expect(counting.counts == (2, 0) && origin.count == 1 && chain.current.requestsInFlight == 0)
    }

    @Test("a callback plan starts the chain once without a task; declined, it answers through handle; a task plan only handles")
    func callbackAndTask() async throws {
        let answering = CallbackOrigin(declines: false)
        let edge = ProxyEdge.serving(FixedChain([answering]))
        guard let pending = begin(edge).waiting() else { throw CancellationError() }
        let answered = Mutex<ProxyResponse?>(nil)
        let started = edge.completeWithoutTask(pending, then: { response in answered.withLock { $0 = response } }) == nil
        #expect(started)
        #expect(answered.withLock { $0 }?.headers[.xRequestID] == "req-1")
        #expect(answering.started.load(ordering: .relaxed) == 1 && answering.handled.load(ordering: .relaxed) == 0)

        let declining = CallbackOrigin(declines: true)
        let fallback = ProxyEdge.serving(FixedChain([declining]))
        guard let declined = begin(fallback).waiting() else { throw CancellationError() }
        guard let declined = fallback.completeWithoutTask(declined, then: { _ in Issue.record("a declined start answered") }) else {
            throw CancellationError()
        }
        #expect(await fallback.complete(declined).status == .ok)
        #expect(declining.started.load(ordering: .relaxed) == 1 && declining.handled.load(ordering: .relaxed) == 1)

        let plain = RecordingHandler()
        let task = ProxyEdge.serving(FixedChain([plain]))
        guard let waiting = begin(task).waiting() else { throw CancellationError() }
        guard let waiting = task.completeWithoutTask(waiting, then: { _ in Issue.record("a task plan started a callback") }) else {
            throw CancellationError()
        }
        #expect(await task.complete(waiting).status == .ok && plain.count == 1)
    }

    @Test("the record a connection passes in gets the route the edge resolved and the chain's notes; a refusal reaches no chain")
    func recordPassedIn() async throws {
        let origin = RecordingHandler { request in
            request.record.noteOrigin("upstream", time: .milliseconds(3))
            return .json(.ok, ByteBuffer(string: "{}"), headers: [.cacheControl: "max-age=60"])
        }
        let cache = CacheDecorator.make(inner: origin, options: CacheOptions(), clock: ManualClock(), metrics: NOOPMetricsHandler.instance)
        let edge = ProxyEdge.serving(FixedChain([cache, origin]))
        func described(_ record: RequestRecord) -> String {
            let entries = record.entries.map { "\($0.name)=\($0.detail)\($0.duration.map { " \($0)" } ?? "")" }
            return "\(record.route ?? "-"): " + entries.joined(separator: ", ")
        }
        let missed = RequestRecord(), hit = RequestRecord(), refused = RequestRecord()
        #expect(await edge.answer("/posts/1", fields: [.xRequestID: "req-1"], record: missed).headers[.xRequestID] == "req-1")
        _ = await edge.answer("/posts/1", record: hit)
        #expect(await edge.answer("/nothing", record: refused).status == .notFound)
        #expect(described(missed) == "/posts/{id}: cache=miss stored, upstream= 0.003 seconds")
        #expect(described(hit) == "/posts/{id}: cache=hit")
        #expect(described(refused) == "-: ", "refusals by the edge never reach the chain")
    }

    func wire(_ response: ProxyResponse) -> String {
        var buffer = ByteBuffer()
        HTTP1ResponseWriter.write(response, method: .get, close: false, date: "Mon, 23 Nov 2026 06:00:00 GMT", into: &buffer)
        return String(buffer: buffer)
    }

    @Test("an upstream answer is stamped with the request id without making its fields, also when it echoes the id")
    func stampedFromLines() throws {
        func upstream(_ fields: String) throws -> ProxyResponse {
            var parser = HTTP1ResponseParser(maxBodySize: 100)
            parser.append(ByteBuffer(string: "HTTP/1.1 200 OK\r\n\(fields)Content-Length: 2\r\n\r\n{}"))
            return try #require(try parser.next(requestMethod: .get)).response
        }
        func appendedToLines(_ response: ProxyResponse) -> [String]? {
            guard case .shared(let storage, let appended) = response.headers.wire, case .lines = storage.source else { return nil }
            return appended.map(\.value)
        }
        let plain = ProxyEdge.stamped(try upstream("Date: x\r\n"), "id-1")
        #expect(appendedToLines(plain) == ["id-1"])
        #expect(wire(plain) == "HTTP/1.1 200 OK\r\nDate: x\r\nX-Request-Id: id-1\r\nContent-Length: 2\r\n\r\n{}")
        let echoed = ProxyEdge.stamped(try upstream("Date: x\r\nX-Request-Id: id-1\r\n"), "id-1")
        #expect(appendedToLines(echoed) == [] && echoed.headers[.xRequestID] == "id-1")
        let other = ProxyEdge.stamped(try upstream("Date: x\r\nx-request-id: theirs\r\n"), "id-1")
        #expect(other.headers[values: .xRequestID] == ["id-1"])
        #expect(wire(other) == "HTTP/1.1 200 OK\r\nDate: x\r\nX-Request-Id: id-1\r\nContent-Length: 2\r\n\r\n{}")
    }

    @Test("an answer is stamped with the request's id as Veneer spells it, whatever the request's last field")
    func stampedFromRequest() throws {
        func stamped(lastField: HTTPField, id: String) throws -> String {
            let request = ProxyRequest(method: .get, route: .item(.posts, "1"), headers: HTTPFields([HTTPField(name: .accept, value: "*/*"), lastField]), requestID: id,
                                       record: RequestRecord())
            var response = ProxyResponse.json(.ok, ByteBuffer(string: "{}"))
            ProxyEdge.stamp(&response, request)
            return try #require(response.headers.first { $0.name == .xRequestID }).description
        }
        // resolve's own field, last: reused.
        #expect(try stamped(lastField: HTTPField(name: .xRequestID, value: "r-1"), id: "r-1") == "X-Request-Id: r-1")
        // A caller's kept id spelled its own way: the answer keeps Veneer's spelling.
        #expect(try stamped(lastField: HTTPField(name: try #require(HTTPField.Name("x-request-id")), value: "r-1"), id: "r-1")
                == "X-Request-Id: r-1")
        // Another id, or another field last: the id made anew.
        #expect(try stamped(lastField: HTTPField(name: .xRequestID, value: "theirs"), id: "r-1") == "X-Request-Id: r-1")
        #expect(try stamped(lastField: HTTPField(name: .userAgent, value: "r-1"), id: "r-1") == "X-Request-Id: r-1")
    }
}
