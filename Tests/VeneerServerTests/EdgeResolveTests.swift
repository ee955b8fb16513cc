import HTTPTypes
import NIOCore
import Testing
import VeneerCore
@testable import VeneerServer
import VeneerTestSupport

/// Step 2 of the edge: what an admitted request asks for. A function of its inputs, tested
/// as one: no chain is asked, no socket opened.
@Suite("The edge, step 2: resolve")
struct EdgeResolveTests {
    static let comments = Resource(name: "comments", kind: .string)
    static let generation = ServingChain(plan: ChainPlan(outermostFirst: [RecordingHandler()]), resources: [.posts, comments],
                                         requestBodyLimit: 64, access: .testListener, forwarding: ForwardingHeaders(passing: ["X-Forwarded-Proto"]),
                                         trace: true)

    /// What resolve made of a request, in a few words: `chain GET /posts/{id} id=1`, `admin POST health`, `refused 405 method_not_allowed`.
    static func resolve(_ method: HTTPRequest.Method, _ target: String, body: IncomingBody = .complete(ByteBuffer()), client: String = "127.0.0.1",
                        servesAdmin: Bool = true, adminOnly: Bool = false, record: RequestRecord? = nil) -> String {
        let parsed = RequestTarget.parse(target, resources: adminOnly ? [] : generation.resources)
        switch ProxyEdge.resolve(parsed, raw: target, method: method, fields: [.xRequestID: "theirs"], body: body, client: ClientAddress(client),
                                 requestID: "r-1", record: record, in: generation, servesAdmin: servesAdmin, adminOnly: adminOnly) {
        case .chain(let request):
            return "chain \(request.method.rawValue) \(request.route.template)\(request.route.id.map { " id=\($0)" } ?? "")"
                + (request.query.map { " ?\($0)" } ?? "")
        case .admin(let call):
            return "admin \(call.method.rawValue) \(call.path)" + (call.query.map { " ?\($0)" } ?? "") + " \(call.body.readableBytes)B"
        case .refused(let response):
            let code = String(buffer: response.body).split(separator: "\"").dropFirst(3).first.map(String.init) ?? "-"
            return "refused \(response.status.code) \(code)" + (response.headers[.allow].map { " Allow: \($0)" } ?? "")
        }
    }

    static let post = IncomingBody.complete(ByteBuffer(string: #"{"title":"t","body":"b"}"#))

    @Test("routes, methods and bodies", arguments: [
        (HTTPRequest.Method.get, "/posts/1?a=b", IncomingBody.complete(ByteBuffer()), "chain GET /posts/{id} id=1 ?a=b"),
        (.get, "/posts", .complete(ByteBuffer()), "chain GET /posts"),
        (.post, "/posts", post, "chain POST /posts"),
        (.get, "/comments/c-1", .complete(ByteBuffer()), "chain GET /comments/{id} id=c-1"),
        (.get, "/nothing", .complete(ByteBuffer()), "refused 404 not_found"),
        (.get, "/posts/01", .complete(ByteBuffer()), "refused 400 bad_request"),
        (.get, "/posts?a<b", .complete(ByteBuffer()), "refused 400 bad_request"),
        (.delete, "/posts", .complete(ByteBuffer()), "refused 405 method_not_allowed Allow: GET, HEAD, POST"),
        // The method is checked before the body: a 405 for a body left unread too.
        (.delete, "/posts", .tooLarge, "refused 405 method_not_allowed Allow: GET, HEAD, POST"),
        (.post, "/posts", .tooLarge, "refused 413 payload_too_large"),
        (.post, "/posts", .complete(ByteBuffer(string: "{not json")), "refused 400 bad_request"),
        (.put, "/posts/1", .complete(ByteBuffer(string: #"{"title":"t"}"#)), "refused 400 bad_request"),
        // Bodies of other collections are not validated.
        (.post, "/comments", .complete(ByteBuffer(string: "{not json")), "chain POST /comments"),
    ])
    func routes(_ method: HTTPRequest.Method, _ target: String, _ body: IncomingBody, _ expected: String) {
        #expect(Self.resolve(method, target, body: body) == expected)
    }

    @Test("the admin API: served on loopback, or to anyone on the separate admin listener; its body read whole", arguments: [
        ("127.0.0.1", true, false, IncomingBody.complete(ByteBuffer(string: "{}")), "admin POST reload ?x=1 2B"),
        ("::1", true, false, .complete(ByteBuffer()), "admin POST reload ?x=1 0B"),
        ("192.0.2.7", true, false, .complete(ByteBuffer()), "refused 404 not_found"),
        ("192.0.2.7", true, true, .complete(ByteBuffer()), "admin POST reload ?x=1 0B"),
        ("127.0.0.1", false, false, .complete(ByteBuffer()), "refused 404 not_found"),
        ("127.0.0.1", true, false, .tooLarge, "refused 413 payload_too_large"),
    ])
    func admin(_ client: String, _ servesAdmin: Bool, _ adminOnly: Bool, _ body: IncomingBody, _ expected: String) {
        #expect(Self.resolve(.post, "/-/reload?x=1", body: body, client: client, servesAdmin: servesAdmin, adminOnly: adminOnly) == expected)
    }

    @Test("a request for the chain: hop-by-hop and forwarding headers stripped (but those passed), the request id set, the route noted, traced as the generation says")
    func chainRequest() throws {
        let fields: HTTPFields = [.xRequestID: "theirs", .connection: "keep-alive, x-hop", HTTPField.Name("X-Hop")!: "1",
                                  HTTPField.Name("X-Forwarded-For")!: "1.2.3.4", HTTPField.Name("X-Forwarded-Proto")!: "https",
                                  .accept: "application/json"]
        let record = RequestRecord()
        let target = RequestTarget.parse("/posts/7", resources: Self.generation.resources)
        guard case .chain(let request) = ProxyEdge.resolve(target, raw: "/posts/7", method: .get, fields: fields, body: .complete(ByteBuffer()),
                                                           client: ClientAddress("127.0.0.1"), requestID: "r-1", record: record,
                                                           in: Self.generation, servesAdmin: true, adminOnly: false) else {
            throw CancellationError()
        }
        #expect(request.headers[values: .xRequestID] == ["r-1"])
        #expect(request.headers[.connection] == nil && request.headers[HTTPField.Name("X-Hop")!] == nil)
        #expect(request.headers[HTTPField.Name("X-Forwarded-For")!] == nil && request.headers[HTTPField.Name("X-Forwarded-Proto")!] == "https")
        #expect(request.headers[.accept] == "application/json" && request.requestID == "r-1" && request.client == ClientAddress("127.0.0.1"))
        #expect(request.record === record && record.route == "/posts/{id}" && record.tracing.contains(.serverTiming))

        // Without a record of the connection's, one of its own; the admin API is noted as one route.
        let admin = RequestRecord()
        _ = Self.resolve(.get, "/-/status", record: admin)
        #expect(admin.route == "/-/")
    }
}
