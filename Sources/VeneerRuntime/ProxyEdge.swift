import HTTPTypes
import HummingbirdCore
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

    /// Answers one request; never throws (failures become JSON error responses). Every
    /// answer carries the request id: the client's `X-Request-Id`, or a generated one.
    func respond(to request: Request, client: ClientAddress?) async -> (ProxyResponse, closeConnection: Bool) {
        let requestID: String
        if let given = request.head.headerFields[.xRequestID], RequestID.isAcceptable(given) {
            requestID = given
        } else {
            requestID = RequestID.generate()
        }
        var (response, close) = await answer(request, client: client, requestID: requestID)
        response.headers[.xRequestID] = requestID
        return (response, close)
    }

    func answer(_ request: Request, client: ClientAddress?, requestID: String) async -> (ProxyResponse, closeConnection: Bool) {
        let head = request.head
        // The request stays on the generation it entered, even if a reload swaps the chain.
        let generation = chain.enter()
        defer { generation.leave() }
        let target = RequestTarget.parse(head.path ?? "", resources: adminOnly ? [] : generation.spec.resources)
        switch target {
        case .admin(let path, let query):
            guard servesAdmin else { return (ProxyError.notFound().response, false) }
            guard adminOnly || client?.isLoopback == true else {
                return (ProxyError.notFound().response, false)
            }
            return (await admin.respond(method: head.method, path: path, query: query, headers: head.headerFields, body: request.body), false)
        case .notFound:
            return (ProxyError.notFound("No such resource: \(Self.printable(head.path ?? "")).").response, false)
        case .badQuery:
            return (ProxyError.badRequest("The query string has characters that are not allowed.").response, false)
        case .badID(let resource, _):
            let expected = resource.hasIntegerIDs ? "a positive integer" : "letters, digits, '-', '_', '.', '~'"
            return (ProxyError.badRequest("The id is not valid for \(resource.name) (expected \(expected)).").response, false)
        case .route(let route, let query):
            return await forward(request, route: route, query: query, client: client, requestID: requestID, generation: generation)
        }
    }

    func forward(_ request: Request, route: ResourceRoute, query: String?, client: ClientAddress?, requestID: String,
                 generation: ChainGeneration) async -> (ProxyResponse, closeConnection: Bool) {
        let head = request.head
        let method = head.method
        let allowed = route.allowedMethods
        guard allowed.contains(method.rawValue) else {
            var error = ProxyError(.methodNotAllowed, "\(method.rawValue) is not allowed on \(route.template).")
            error.headers[.allow] = allowed.joined(separator: ", ")
            return (error.response, false)
        }

        let limit = generation.spec.limits.requestBody
        if let declared = head.headerFields[.contentLength].flatMap({ Int($0) }), declared > limit {
            return (ProxyError(.payloadTooLarge, "The body is larger than \(limit) bytes.").response, true)
        }
        var body = ByteBuffer()
        do {
            body = try await request.body.collect(upTo: limit)
        } catch is NIOTooManyBytesError {
            return (ProxyError(.payloadTooLarge, "The body is larger than \(limit) bytes.").response, true)
        } catch {
            return (ProxyError.badRequest("The request body could not be read.").response, true)
        }

        if route.resource.kind == .posts, method == .post || method == .put || method == .patch {
            do {
                _ = try PostValidation.validate(body, method: method, id: route.id)
            } catch {
                return (error.response, false)
            }
        }

        var headers = head.headerFields
        HopByHop.strip(&headers)
        headers[.xRequestID] = requestID
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

    /// At most 100 printable ASCII characters of client text, for messages.
    static func printable(_ text: String) -> String {
        let cleaned = String(decoding: text.utf8.prefix(100).map { $0 >= 0x20 && $0 < 0x7F ? $0 : UInt8(ascii: "?") }, as: UTF8.self)
        return text.utf8.count > 100 ? cleaned + "..." : cleaned
    }
}
