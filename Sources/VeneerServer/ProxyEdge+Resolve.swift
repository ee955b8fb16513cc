import HTTPTypes
import NIOCore
import VeneerCore
import VeneerHTTP1

extension ProxyEdge {
    /// What ``resolve(_:raw:method:fields:body:client:requestID:record:in:servesAdmin:adminOnly:)``
    /// made of an admitted request.
    enum Resolution: Sendable {
        /// A request of the posts API, checked, for the chain.
        case chain(ProxyRequest)
        /// A request of the admin API from a client that may ask it.
        case admin(AdminCall)
        /// Refused by the edge (404, 400, 405 with `Allow`, 413), not yet stamped.
        case refused(ProxyResponse)
    }

    /// A request of the admin API as ``AdminResponder`` takes it.
    struct AdminCall: Sendable {
        let method: HTTPRequest.Method
        /// What follows `/-/`, as the client wrote it.
        let path: String
        let query: String?
        let fields: HTTPFields
        let body: ByteBuffer
    }

    /// Step 2, resolve: what an admitted request asks for (its `target` as admit read it, and
    /// as the client wrote it). The route (a path that names none
    /// is 404, a bad id or query 400), the method (405 with `Allow`), the body (413 when it
    /// was not read whole; for posts, its JSON checked), and for the admin API whether this
    /// listener serves it and to whom (loopback clients only, unless it is the separate admin
    /// listener). A request for the chain leaves with its headers cleaned (hop-by-hop and
    /// forwarding headers stripped, the request id set) and its record tracing what the
    /// generation asks for. The route is noted in `record` (a connection that observes its
    /// requests passes one; else a new one is made).
    ///
    /// A function of its inputs: `generation` gives the body limit, the forwarding headers and
    /// whether to trace; nothing here waits or asks the chain.
    @inline(__always)
    static func resolve(_ target: RequestTarget, raw rawTarget: String, method: HTTPRequest.Method, fields: HTTPFields, body: IncomingBody, client: ClientAddress?,
                        requestID: String, record: RequestRecord?, in generation: ServingChain, servesAdmin: Bool,
                        adminOnly: Bool, peer: PeerIdentity? = nil) -> Resolution {
        switch target {
        case .admin(let path, let query):
            // One route for the whole admin API: its paths are the client's text.
            record?.noteRoute("/-/")
            // A caller the kernel named (a Unix socket's, a loopback one's) is local too.
            guard servesAdmin, adminOnly || client?.isLoopback == true || peer != nil else { return .refused(ProxyError.notFound().response) }
            guard case .complete(let bytes, _) = body else { return .refused(notRead(body, generation.requestBodyLimit)) }
            return .admin(AdminCall(method: method, path: path, query: query, fields: fields, body: bytes))
        case .notFound:
            return .refused(ProxyError.notFound("No such resource: \(printable(rawTarget)).").response)
        case .badQuery:
            return .refused(ProxyError.badRequest("The query string has characters that are not allowed.").response)
        case .badID(let resource, _):
            let expected = resource.hasIntegerIDs ? "a positive integer" : "letters, digits, '-', '_', '.', '~'"
            return .refused(ProxyError.badRequest("The id is not valid for \(resource.name) (expected \(expected)).").response)
        case .route(let route, let query):
            record?.noteRoute(route.template)
            guard route.allows(method) else {
                var error = ProxyError(.methodNotAllowed, "\(method.rawValue) is not allowed on \(route.template).")
                error.headers[.allow] = route.allowedMethods.joined(separator: ", ")
                return .refused(error.response)
            }
            // A body refused for its size stops here; one that streams goes on as a stream.
            var bytes = ByteBuffer(), stream: BodyStream?
            switch body {
            case .complete(let whole, _): bytes = whole
            case .streamed(let streamed): stream = streamed
            case .tooLarge, .overBudget: return .refused(notRead(body, generation.requestBodyLimit))
            }
            if route.resource.kind == .posts, method == .post || method == .put || method == .patch {
                do {
                    _ = try PostValidation.validate(bytes, method: method, id: route.id)
                } catch {
                    return .refused(error.response)
                }
            }
            var headers = fields
            HopByHop.strip(&headers)
            generation.forwarding.strip(&headers)
            headers.setOrAppend(.xRequestID, requestID)
            let record = record ?? RequestRecord()
            // Read per request from the generation it entered: a reload can turn it on or off.
            if generation.trace { record.trace(.serverTiming) }
            var request = ProxyRequest(method: method, route: route, query: query, headers: headers, body: bytes, client: client,
                                       peer: peer, requestID: requestID, record: record)
            request.stream = stream
            return .chain(request)
        }
    }

    /// The refusal of a body that was not read: 413 over `limit`, 503 `overloaded` over the
    /// buffer budget (`limits.buffered`), which may have room again in a moment.
    static func notRead(_ body: IncomingBody, _ limit: Int) -> ProxyResponse {
        guard case .overBudget = body else { return tooLarge(limit) }
        var error = ProxyError(.overloaded, "Veneer is holding as many bodies as limits.buffered allows; try again shortly.")
        error.headers[.retryAfter] = "1"
        return error.response
    }

    /// 413 for a body over `limit`.
    static func tooLarge(_ limit: Int) -> ProxyResponse {
        ProxyError(.payloadTooLarge, "The body is larger than \(limit) bytes.").response
    }
}
