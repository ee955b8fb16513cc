import HTTPTypes
import NIOCore
import Synchronization
import Testing
import VeneerCore
@testable import VeneerServer
import VeneerTestSupport

/// Step 3 of the edge: the chain, the way its plan says, asked once; or the admin API,
/// streamed or answered. No sockets: chains built by hand, requests made as resolve makes them.
@Suite("The edge, step 3: dispatch")
struct EdgeDispatchTests {
    /// An immediate-answering handler that answers at once when told to, else defers; it counts how it was asked.
    final class Immediate: ImmediateAnswering {
        let atOnce: Bool
        let asked = Atomic<Int>(0)

        init(atOnce: Bool) {
            self.atOnce = atOnce
        }

        var answersImmediately: Bool { true }

        func answerImmediately(_ request: ProxyRequest) -> ImmediateAnswer {
            asked.wrappingAdd(1, ordering: .relaxed)
            request.record.append(RequestRecord.Entry(name: "immediate", detail: atOnce ? "at once" : "later", duration: nil))
            let answer = ProxyResponse.json(.ok, ByteBuffer(string: "{}"), headers: [.vary: "Accept"])
            return atOnce ? .answer(answer) : .later(Deferred { answer })
        }
    }

    static func request(origin: String? = nil) -> ProxyRequest {
        var headers: HTTPFields = [.xRequestID: "r-1"]
        if let origin { headers[.origin] = origin }
        let record = RequestRecord()
        record.trace(.serverTiming)
        return ProxyRequest(method: .get, route: .item(.posts, "1"), headers: headers, requestID: "r-1", record: record)
    }

    /// `dispatch` of `request` through `chain`, as the step leaves it: `answered`, `waiting <work>` or `streamed`.
    static func dispatch(_ edge: ProxyEdge, _ chain: FixedChain, _ request: ProxyRequest) -> (String, ProxyResponse?) {
        let admitted = ProxyEdge.Admitted(requestID: request.requestID, lease: chain.lease(), target: .route(request.route, query: nil), corsOrigin: nil)
        switch edge.dispatch(request, in: admitted) {
        case .answered(let response): return ("answered", response)
        case .streamed: return ("streamed", nil)
        case .waiting(let pending):
            let work = switch pending.work {
            case .admin: "admin"
            case .rest: "rest"
            case .callback: "callback"
            case .task: "task"
            }
            return ("waiting \(work), \(chain.current.requestsInFlight) lease", nil)
        }
    }

    @Test("an answer the chain has at once goes out now, finished (stamped, CORS for a page, Server-Timing when traced), its lease ended")
    func atOnce() throws {
        let handler = Immediate(atOnce: true)
        let chain = FixedChain([handler])
        let (outcome, answer) = Self.dispatch(.serving(chain), chain, Self.request(origin: "http://localhost:3000"))
        let response = try #require(answer)
        #expect(outcome == "answered" && chain.current.requestsInFlight == 0 && handler.asked.load(ordering: .relaxed) == 1)
        #expect(response.headers[.xRequestID] == "r-1" && response.headers[.serverTiming] == #"immediate;desc="at once""#)
        #expect(response.headers[.accessControlAllowOrigin] == "http://localhost:3000" && response.headers[.vary] == "Accept, Origin")
    }

    @Test("what the chain cannot answer at once waits, holding its lease, as its plan says: the rest, a callback, a task")
    func waits() {
        let later = FixedChain([Immediate(atOnce: false)])
        #expect(Self.dispatch(.serving(later), later, Self.request()).0 == "waiting rest, 1 lease")
        #expect(later.current.requestsInFlight == 0, "the lease ends with the request left waiting")
        let callback = FixedChain([EdgeTests.CallbackOrigin(declines: false)])
        #expect(Self.dispatch(.serving(callback), callback, Self.request()).0 == "waiting callback, 1 lease")
        let task = FixedChain([RecordingHandler()])
        #expect(Self.dispatch(.serving(task), task, Self.request()).0 == "waiting task, 1 lease")
    }

    @Test("the admin API: a path that streams is a stream (no lease; a HEAD gets its head; 503 when every place is taken); any other waits")
    func admin() async throws {
        let admin = AdminStreamTests.StreamingAdmin()
        let chain = FixedChain([RecordingHandler()])
        let edge = ProxyEdge(chain: chain, admin: admin, logger: quietLogger(), adminOnly: false, servesAdmin: true)
        func dispatch(_ method: HTTPRequest.Method, _ path: String) -> String {
            let admitted = ProxyEdge.Admitted(requestID: "r-a", lease: chain.lease(), target: .admin(path: path, query: nil), corsOrigin: nil)
            let call = ProxyEdge.AdminCall(method: method, path: path, query: nil, fields: [:], body: ByteBuffer())
            switch edge.dispatch(call, admitted) {
            case .answered(let response): return "answered \(response.status.code)"
            case .waiting(let pending): return "waiting \(pending.requestID), \(chain.current.requestsInFlight) lease"
            case .streamed(let answer):
                defer { answer.stop() }
                return "streamed \(answer.chunks == nil ? "head" : "whole"), \(chain.current.requestsInFlight) lease, \(answer.head.headers[.xRequestID] ?? "-")"
            }
        }
        #expect(dispatch(.get, "events") == "streamed whole, 0 lease, r-a")
        #expect(dispatch(.head, "events") == "streamed head, 0 lease, r-a")
        #expect(dispatch(.get, "health") == "waiting r-a, 1 lease")
        #expect(dispatch(.post, "events") == "waiting r-a, 1 lease")
        try await eventually("the streams were stopped") { edge.streams.count == 0 }
        for _ in 0..<edge.streams.limit { #expect(edge.streams.take()) }
        #expect(dispatch(.get, "events") == "answered 503")
        #expect(chain.current.requestsInFlight == 0)
    }
}
