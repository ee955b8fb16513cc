import HTTPTypes
import NIOCore
import NIOEmbedded
import VeneerCore
@testable import VeneerServer
import VeneerTestSupport

/// A chain that never changes, built by hand: what the runtime's active chain is to the edge.
final class FixedChain: ChainSource {
    let current: ServingChain

    /// The chain of `handlers`, outermost first, planned as ChainBuilder plans it.
    init(_ handlers: [any Handler], resources: [Resource] = [.posts], bodyLimit: Int = 1 << 20) {
        current = ServingChain(plan: ChainPlan(outermostFirst: handlers), resources: resources, requestBodyLimit: bodyLimit)
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

extension ProxyEdge {
    /// An edge serving `chain` (and no admin API worth the name).
    static func serving(_ chain: FixedChain, observer: (@Sendable (ProxyRequest, ProxyResponse) -> Void)? = nil) -> ProxyEdge {
        ProxyEdge(chain: chain, admin: NoAdmin(), logger: quietLogger(), adminOnly: false, servesAdmin: true, observer: observer)
    }
}

/// ``ProxyEdge/completeWithoutTask(_:to:)`` with a closure.
struct ClosureDelivery: AnswerDelivery {
    let done: @Sendable (ProxyResponse, Bool) -> Void

    func deliver(_ response: ProxyResponse, closeConnection: Bool) {
        done(response, closeConnection)
    }
}

extension ProxyEdge {
    func completeWithoutTask(_ pending: consuming Pending, then done: @escaping @Sendable (ProxyResponse, Bool) -> Void) -> Pending? {
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
func embeddedConnection(_ chain: [any Handler], limits: ConnectionLimits = ConnectionLimits(requestHeaders: 8192))
    async throws -> (EmbeddedChannel, EmbeddedEventLoop) {
    let loop = EmbeddedEventLoop()
    let channel = EmbeddedChannel(loop: loop)
    try channel.pipeline.syncOperations.addHandler(ProxyRequestHandler(
        edge: .serving(FixedChain(chain)), dates: HTTPDateCache(), client: ClientAddress("127.0.0.1"), localPort: 1, limits: limits,
        eventLoop: loop, logger: quietLogger()))
    try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1))
    return (channel, loop)
}
