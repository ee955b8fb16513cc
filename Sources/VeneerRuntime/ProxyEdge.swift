import HTTPTypes
import Logging
import NIOCore
import VeneerConfig
import VeneerCore

/// The server edge: the only place where HTTP requests become ``ProxyRequest``s and errors
/// become HTTP responses. It checks the path, the method, the body size and (for posts)
/// the body, then hands the request to the active chain.
struct ProxyEdge: Sendable {
    let chain: ActiveChain
    let admin: AdminAPI
    let logger: Logger
    /// Whether this listener is the separate admin listener (`admin: {listen: ...}`).
    let adminOnly: Bool
    /// Whether `/-/` is served on this listener.
    let servesAdmin: Bool

    /// The body limit of the chain serving new requests.
    var requestBodyLimit: Int { chain.generation.requestBodyLimit }

    /// Answers one request; never throws (failures become JSON error responses). Every
    /// answer carries the request id: the client's `X-Request-Id`, or a generated one.
    func respond(method: HTTPRequest.Method, target: String, fields: HTTPFields, body: IncomingBody,
                 client: ClientAddress?) async -> (ProxyResponse, closeConnection: Bool) {
        let requestID: String
        if let given = fields[.xRequestID], RequestID.isAcceptable(given) {
            requestID = given
        } else {
            requestID = RequestID.generate()
        }
        var (response, close) = await answer(method: method, target: target, fields: fields, body: body, client: client, requestID: requestID)
        if response.headers.contains(.xRequestID) {
            response.headers[.xRequestID] = requestID
        } else {
            response.appendHeader(HTTPField(name: .xRequestID, value: requestID))
        }
        return (response, close)
    }

    /// ``respond(method:target:fields:body:client:)`` for a request in the HTTP types.
    func respond(to head: HTTPRequest, body: IncomingBody, client: ClientAddress?) async -> (ProxyResponse, closeConnection: Bool) {
        await respond(method: head.method, target: head.path ?? "", fields: head.headerFields, body: body, client: client)
    }

    @inline(__always)
    func answer(method: HTTPRequest.Method, target rawTarget: String, fields: HTTPFields, body: IncomingBody, client: ClientAddress?,
                requestID: String) async -> (ProxyResponse, closeConnection: Bool) {
        // The request stays on the generation it entered, even if a reload swaps the chain.
        let generation = chain.enter()
        defer { generation.leave() }
        let target = RequestTarget.parse(rawTarget, resources: adminOnly ? [] : generation.resources)
        switch target {
        case .admin(let path, let query):
            guard servesAdmin else { return (ProxyError.notFound().response, false) }
            guard adminOnly || client?.isLoopback == true else {
                return (ProxyError.notFound().response, false)
            }
            guard case .complete(let bytes) = body else { return (Self.tooLarge(generation.requestBodyLimit), true) }
            return (await admin.respond(method: method, path: path, query: query, headers: fields, body: bytes), false)
        case .notFound:
            return (ProxyError.notFound("No such resource: \(Self.printable(rawTarget)).").response, false)
        case .badQuery:
            return (ProxyError.badRequest("The query string has characters that are not allowed.").response, false)
        case .badID(let resource, _):
            let expected = resource.hasIntegerIDs ? "a positive integer" : "letters, digits, '-', '_', '.', '~'"
            return (ProxyError.badRequest("The id is not valid for \(resource.name) (expected \(expected)).").response, false)
        case .route(let route, let query):
            return await forward(method: method, fields: fields, body: body, route: route, query: query, client: client,
                                 requestID: requestID, generation: generation)
        }
    }

    @inline(__always)
    func forward(method: HTTPRequest.Method, fields: HTTPFields, body incoming: IncomingBody, route: ResourceRoute, query: String?,
                 client: ClientAddress?, requestID: String, generation: ChainGeneration) async -> (ProxyResponse, closeConnection: Bool) {
        guard route.allows(method) else {
            var error = ProxyError(.methodNotAllowed, "\(method.rawValue) is not allowed on \(route.template).")
            error.headers[.allow] = route.allowedMethods.joined(separator: ", ")
            // A body that was not read whole is still on the wire: the connection cannot go on.
            return (error.response, incoming.isTooLarge)
        }
        guard case .complete(let body) = incoming else {
            return (Self.tooLarge(generation.requestBodyLimit), true)
        }

        if route.resource.kind == .posts, method == .post || method == .put || method == .patch {
            do {
                _ = try PostValidation.validate(body, method: method, id: route.id)
            } catch {
                return (error.response, false)
            }
        }

        var headers = fields
        HopByHop.strip(&headers)
        headers.setOrAppend(.xRequestID, requestID)
        let proxyRequest = ProxyRequest(method: method, route: route, query: query, headers: headers,
                                        body: body, client: client, requestID: requestID)

        var response: ProxyResponse
        do {
            response = try await generation.handler.handle(proxyRequest)
        } catch let error as ProxyError {
            response = error.response
        } catch {
            logger.error("request failed inside the chain", metadata: [
                "request_id": .string(requestID), "error_type": .string(String(describing: type(of: error))),
            ])
            response = ProxyError.internal.response
        }
        return (response, false)
    }

    static func tooLarge(_ limit: Int) -> ProxyResponse {
        ProxyError(.payloadTooLarge, "The body is larger than \(limit) bytes.").response
    }

    /// At most 100 printable ASCII characters of client text, for messages.
    static func printable(_ text: String) -> String {
        let cleaned = String(decoding: text.utf8.prefix(100).map { $0 >= 0x20 && $0 < 0x7F ? $0 : UInt8(ascii: "?") }, as: UTF8.self)
        return text.utf8.count > 100 ? cleaned + "..." : cleaned
    }
}

/// A request body as the connection read it: whole, or refused for its size (declared or
/// actual) without reading the rest.
enum IncomingBody: Sendable {
    case complete(ByteBuffer)
    case tooLarge

    var isTooLarge: Bool {
        if case .tooLarge = self { return true }
        return false
    }
}
