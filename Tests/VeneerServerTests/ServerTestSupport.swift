import HTTPTypes
import NIOCore
import NIOEmbedded
import VeneerCore
@testable import VeneerServer
import VeneerTestSupport

/// A chain that never changes, built by hand: what the runtime's active chain is to the edge.
final class FixedChain: ChainSource {
    let current: ServingChain

    /// The chain of `handlers`, outermost first, planned as ChainBuilder plans it, behind the
    /// checks of a listener on 127.0.0.1 that also answers for the Host `x`.
    init(_ handlers: [any Handler], resources: [Resource] = [.posts], bodyLimit: Int = 1 << 20, access: EdgeAccess = .testListener) {
        current = ServingChain(plan: ChainPlan(outermostFirst: handlers), resources: resources, requestBodyLimit: bodyLimit, access: access)
    }

    func lease() -> GenerationLease {
        GenerationLease(entering: current)
    }
}

/// An admin API that knows nothing.
struct NoAdmin: AdminResponder {
    func respond(method: HTTPRequest.Method, path: String, query: String?, headers: HTTPFields, body: ByteBuffer) async -> ProxyResponse {
        ProxyError.notFound().response
    }
}

extension EdgeAccess {
    /// A listener on 127.0.0.1 that also answers for the Host `x` (what the embedded connections send).
    static let testListener = EdgeAccess(listenHost: "127.0.0.1", allowedHosts: ["x"])
}

extension ProxyEdge {
    /// An edge serving `chain` (and no admin API worth the name).
    static func serving(_ chain: FixedChain) -> ProxyEdge {
        ProxyEdge(chain: chain, admin: NoAdmin(), logger: quietLogger(), adminOnly: false, servesAdmin: true)
    }

    /// The whole answer to one request, as a connection would write it (a stream's head alone,
    /// the stream stopped): begin, then complete what waits.
    func answer(_ target: String, method: HTTPRequest.Method = .get, fields: HTTPFields = [:], body: IncomingBody = .complete(ByteBuffer()),
                client: ClientAddress? = ClientAddress("127.0.0.1"), record: RequestRecord? = nil) async -> ProxyResponse {
        switch begin(method: method, target: target, fields: fields, body: body, client: client, record: record) {
        case .answered(let response): return response
        case .waiting(let pending): return await complete(pending)
        case .streamed(let answer):
            answer.stop()
            return answer.head
        }
    }
}

/// ``ProxyEdge/completeWithoutTask(_:to:)`` with a closure.
struct ClosureDelivery: AnswerDelivery {
    let done: @Sendable (ProxyResponse) -> Void

    func deliver(_ response: ProxyResponse) {
        done(response)
    }
}

extension ProxyEdge {
    func completeWithoutTask(_ pending: consuming Pending, then done: @escaping @Sendable (ProxyResponse) -> Void) -> Pending? {
        completeWithoutTask(pending, to: ClosureDelivery(done: done))
    }
}

/// Answers every request at once, as a fresh cache hit is answered.
struct AnswersAtOnce: ImmediateAnswering {
    var answersImmediately: Bool { true }
    func answerImmediately(_ request: ProxyRequest) -> ImmediateAnswer { .answer(.json(.ok, ByteBuffer(string: "[]"))) }
}

/// A connection handler on an embedded channel (made active, as an accepted socket is) whose
/// loop runs only when told.
func embeddedConnection(_ chain: [any Handler], limits: ConnectionLimits = ConnectionLimits(requestHeaders: 8192), bodyLimit: Int = 1 << 20)
    async throws -> (EmbeddedChannel, EmbeddedEventLoop) {
    let loop = EmbeddedEventLoop()
    let channel = EmbeddedChannel(loop: loop)
    try channel.pipeline.syncOperations.addHandler(ProxyRequestHandler(
        edge: .serving(FixedChain(chain, bodyLimit: bodyLimit)), dates: HTTPDateCache(), client: ClientAddress("127.0.0.1"), localPort: 1, limits: limits,
        eventLoop: loop, logger: quietLogger()))
    try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1))
    return (channel, loop)
}
