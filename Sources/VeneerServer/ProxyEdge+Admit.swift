import HTTPTypes
import VeneerCore

extension ProxyEdge {
    /// What ``admit(method:target:fields:authority:localPort:requestID:)`` made of a request.
    enum Admission: ~Copyable, Sendable {
        /// Served: on to ``resolve(_:raw:method:fields:body:client:requestID:record:in:servesAdmin:adminOnly:)``.
        case admitted(Admitted)
        /// Refused before anything else (421 for a Host it does not answer for, 403 for a page
        /// of an Origin it does not allow), or a CORS preflight, which the edge answers itself;
        /// stamped with the request id. Its lease has ended.
        case refused(ProxyResponse)
    }

    /// A request this listener serves, on the generation it entered.
    struct Admitted: ~Copyable, Sendable {
        /// The client's `X-Request-Id` when reasonable, else a new one.
        let requestID: String
        /// The request's hold on the generation it entered: it stays on it even if a reload
        /// swaps the chain, and its route table, body limit and plan are that generation's.
        let lease: GenerationLease
        /// The target, read with that generation's routes.
        let target: RequestTarget
        /// A listed origin whose answers get CORS headers (nil: none, or not a page).
        let corsOrigin: String?

        /// An answer of the edge's own to this request as it goes out: stamped, and readable
        /// by the page of an allowed origin.
        func outgoing(_ response: ProxyResponse) -> ProxyResponse {
            let response = ProxyEdge.stamped(response, requestID)
            return corsOrigin.map { EdgeAccess.withCORS(response, origin: $0) } ?? response
        }
    }

    /// Step 1, admit: the request id, the lease on the generation serving new requests (the
    /// target is read with its routes), and before anything else the checks that keep web
    /// pages out: a Host it does not answer for (DNS rebinding), an Origin it does not allow
    /// (a page of another site), and the admin API's own rules (``EdgeAccess``).
    @inline(__always)
    func admit(method: HTTPRequest.Method, target rawTarget: String, fields: HTTPFields, authority: String?, localPort: Int,
               requestID given: String?) -> Admission {
        let requestID = given ?? Self.requestID(fields)
        let lease = chain.lease()
        let generation = lease.chain
        let target = RequestTarget.parse(rawTarget, resources: adminOnly ? [] : generation.resources)
        let refusal: ProxyResponse
        switch generation.access.verdict(method: method, authority: authority, fields: fields, port: localPort, admin: adminOnly || target.isAdmin) {
        case .pass(let corsOrigin):
            return .admitted(Admitted(requestID: requestID, lease: lease, target: target, corsOrigin: corsOrigin))
        case .misdirected:
            refusal = ProxyError(.misdirectedRequest, "Veneer does not answer for this Host (allowed_hosts).").response
        case .crossSite(let why):
            refusal = ProxyError(.crossSiteRefused, why).response
        case .preflight(let origin):
            refusal = EdgeAccess.preflightAnswer(origin: origin, fields: fields)
        }
        return .refused(Self.stamped(refusal, requestID))
    }
}

extension RequestTarget {
    /// Whether it names the admin API (`/-/…`), whose access rules are stricter.
    var isAdmin: Bool {
        if case .admin = self { return true }
        return false
    }
}
