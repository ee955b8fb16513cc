import HTTPTypes
import Logging
import NIOCore
import VeneerCore
import VeneerHTTP1

/// The server edge: the only place where HTTP requests become ``ProxyRequest``s and errors
/// become HTTP responses. It checks the path, the method, the body size and (for posts)
/// the body, then hands the request to the active chain, the way the chain's plan says.
public struct ProxyEdge: Sendable {
    let chain: any ChainSource
    let admin: any AdminResponder
    let logger: Logger
    /// Whether this listener is the separate admin listener (`admin: {listen: ...}`).
    let adminOnly: Bool
    /// Whether `/-/` is served on this listener.
    let servesAdmin: Bool
    /// Called with each request the chain answered and its answer as it goes out, the
    /// request's ``RequestRecord`` complete: where an access log or `Server-Timing` reads it.
    var observer: (@Sendable (ProxyRequest, ProxyResponse) -> Void)?
    /// Where the connections write one line per request they answered, refusals included.
    let accessLog: AccessLog?
    /// What the connections count of the requests they answered, refusals included.
    let metrics: EdgeMetrics?
    /// Where the connections add each request the chain answered, for the status page.
    let feed: RequestFeed?
    /// The streamed admin answers being written (``AdminStream``), shared by the copies of this edge.
    let streams: AdminStreamSlots

    /// An edge answering through `chain`, with `admin` under `/-/` when `servesAdmin` (and
    /// nothing else when `adminOnly`, the separate admin listener).
    public init(chain: any ChainSource, admin: any AdminResponder, logger: Logger, adminOnly: Bool, servesAdmin: Bool,
                observer: (@Sendable (ProxyRequest, ProxyResponse) -> Void)? = nil, accessLog: AccessLog? = nil,
                metrics: EdgeMetrics? = nil, feed: RequestFeed? = nil) {
        self.chain = chain
        self.admin = admin
        self.logger = logger
        self.adminOnly = adminOnly
        self.servesAdmin = servesAdmin
        self.observer = observer
        self.accessLog = accessLog
        self.metrics = metrics
        self.feed = feed
        streams = AdminStreamSlots()
    }

    /// The request's id: its `X-Request-Id` when that is reasonable, else a new one.
    @inline(__always)
    static func requestID(_ fields: HTTPFields) -> String {
        if let given = fields[.xRequestID], RequestID.isAcceptable(given) { return given }
        return RequestID.generate()
    }

    /// The body limit of the chain serving new requests.
    var requestBodyLimit: Int { chain.current.requestBodyLimit }

    /// The route template `target` names (`/posts/{id}`, `/-/` for the admin API), as
    /// ``begin(method:target:fields:body:client:authority:localPort:record:)`` notes it; nil
    /// for a path that names none. For a request refused before it reached the edge.
    func routeTemplate(_ target: String) -> String? {
        switch RequestTarget.parse(target, resources: adminOnly ? [] : chain.current.resources) {
        case .admin: return "/-/"
        case .route(let route, _): return route.template
        case .badID, .badQuery, .notFound: return nil
        }
    }

    /// Answers one request; never throws (failures become JSON error responses). Every
    /// answer carries the request id: the client's `X-Request-Id`, or a generated one. A
    /// streamed answer comes back as its head (its first bytes for a body), the stream stopped.
    func respond(method: HTTPRequest.Method, target: String, fields: HTTPFields, body: IncomingBody,
                 client: ClientAddress?, authority: String? = nil, localPort: Int? = nil,
                 record: RequestRecord? = nil) async -> (ProxyResponse, closeConnection: Bool) {
        switch begin(method: method, target: target, fields: fields, body: body, client: client, authority: authority, localPort: localPort,
                     record: record) {
        case .answered(let response, let close): return (response, close)
        case .waiting(let pending): return await complete(pending)
        case .streamed(let answer):
            answer.stop()
            return (answer.head, false)
        }
    }

    /// ``respond(method:target:fields:body:client:)`` for a request in the HTTP types.
    func respond(to head: HTTPRequest, body: IncomingBody, client: ClientAddress?) async -> (ProxyResponse, closeConnection: Bool) {
        await respond(method: head.method, target: head.path ?? "", fields: head.headerFields, body: body, client: client)
    }

    /// What ``begin(method:target:fields:body:client:)`` made of a request. Not copyable: a
    /// request left waiting carries its lease.
    enum Start: ~Copyable, Sendable {
        /// Answered without waiting: refused by the edge, or answered at once by the chain
        /// (``ChainPlan/immediate(_:)``, a fresh cache hit).
        case answered(ProxyResponse, closeConnection: Bool)
        /// To be finished by ``complete(_:)`` (or ``completeWithoutTask(_:then:)``).
        case waiting(Pending)
        /// A streamed admin answer (``AdminResponder/stream(path:query:headers:)``): its head
        /// now, its chunks as they come.
        case streamed(StreamedAnswer)
    }

    /// A request checked by the edge that still needs an `await` or a callback: the admin
    /// API, or the chain, the way the chain's plan says. It holds the request's lease on the
    /// generation it entered, which ends with it (wherever it goes: see ``GenerationLease``).
    struct Pending: ~Copyable, Sendable {
        enum Work: Sendable {
            case admin(method: HTTPRequest.Method, path: String, query: String?, fields: HTTPFields, body: ByteBuffer)
            /// The rest of an answer the chain could not give at once.
            case rest(Deferred, ProxyRequest)
            /// To start by callback (``ChainPlan/callback(_:)``); in a task if that is declined.
            case callback(any CallbackAnswering, ProxyRequest)
            /// To answer in a task.
            case task(any Handler, ProxyRequest)
        }
        let work: Work
        let requestID: String
        /// Taken by ``begin(method:target:fields:body:client:)``.
        let lease: GenerationLease

        /// The request as a task that runs it once carries it (see ``Handed``).
        consuming func handOver() -> Handed {
            let work = work, requestID = requestID
            return Handed(work: work, requestID: requestID, lease: lease.handOver())
        }
    }

    /// A ``Pending`` request on its way into a task: copyable, so that the task's closure
    /// holds it inline (a noncopyable capture costs a heap box); ``complete(_:)-swift.method``
    /// ends its lease, and the task runs it exactly once.
    struct Handed: Sendable {
        let work: Pending.Work
        let requestID: String
        let lease: LeaseHandOver
    }

    /// The part of answering that needs no `await`: the request id, the checks of the Host,
    /// the Origin, the path, method and body, and the chain's answer if it has one at once. A
    /// connection handler answers what comes back `.answered` without starting a task.
    /// `authority` is the request's Host (nil without one), `localPort` the port it came to. A
    /// connection that observes its requests passes their `record` (the route is noted in it)
    /// and their `requestID` (``requestID(_:)``), which its own lines about them then share.
    @inline(__always)
    func begin(method: HTTPRequest.Method, target rawTarget: String, fields: HTTPFields, body: IncomingBody,
               client: ClientAddress?, authority: String? = nil, localPort: Int? = nil, record: RequestRecord? = nil,
               requestID given: String? = nil) -> Start {
        let requestID = given ?? Self.requestID(fields)
        // The request stays on the generation it entered, even if a reload swaps the chain.
        let lease = chain.lease()
        let generation = lease.chain
        let target = RequestTarget.parse(rawTarget, resources: adminOnly ? [] : generation.resources)
        // Before anything else: a Host it does not answer for (DNS rebinding), an Origin it
        // does not allow (a web page), and the admin API's own rules. A body not read whole
        // is still on the wire: the connection cannot go on after a refusal.
        var corsOrigin: String?
        if generation.access.enforced {
            var admin = adminOnly
            if case .admin = target { admin = true }
            switch generation.access.verdict(method: method, authority: authority, fields: fields, port: localPort ?? 0, admin: admin) {
            case .pass(let origin):
                corsOrigin = origin
            case .misdirected:
                return .answered(Self.stamped(ProxyError(.misdirectedRequest, "Veneer does not answer for this Host (allowed_hosts).").response,
                                              requestID), closeConnection: body.isTooLarge)
            case .crossSite(let why):
                return .answered(Self.stamped(ProxyError(.crossSiteRefused, why).response, requestID), closeConnection: body.isTooLarge)
            case .preflight(let origin):
                return .answered(Self.stamped(EdgeAccess.preflightAnswer(origin: origin, fields: fields), requestID),
                                 closeConnection: body.isTooLarge)
            }
        }
        func answered(_ response: ProxyResponse, close: Bool = false) -> Start {
            let response = Self.stamped(response, requestID)
            return .answered(corsOrigin.map { EdgeAccess.withCORS(response, origin: $0) } ?? response, closeConnection: close)
        }
        switch target {
        case .admin(let path, let query):
            // One route for the whole admin API: its paths are the client's text.
            record?.noteRoute("/-/")
            guard servesAdmin else { return answered(ProxyError.notFound().response) }
            guard adminOnly || client?.isLoopback == true else {
                return answered(ProxyError.notFound().response)
            }
            guard case .complete(let bytes) = body else { return answered(Self.tooLarge(generation.requestBodyLimit), close: true) }
            if method == .get || method == .head, let stream = admin.stream(path: path, query: query, headers: fields) {
                // A stream holds no lease: a reload or a shutdown never waits for it (shutdown ends it).
                lease.end()
                return streamed(stream, method: method, requestID: requestID)
            }
            return .waiting(Pending(work: .admin(method: method, path: path, query: query, fields: fields, body: bytes),
                                    requestID: requestID, lease: lease))
        case .notFound:
            return answered(ProxyError.notFound("No such resource: \(Self.printable(rawTarget)).").response)
        case .badQuery:
            return answered(ProxyError.badRequest("The query string has characters that are not allowed.").response)
        case .badID(let resource, _):
            let expected = resource.hasIntegerIDs ? "a positive integer" : "letters, digits, '-', '_', '.', '~'"
            return answered(ProxyError.badRequest("The id is not valid for \(resource.name) (expected \(expected)).").response)
        case .route(let route, let query):
            record?.noteRoute(route.template)
            guard route.allows(method) else {
                var error = ProxyError(.methodNotAllowed, "\(method.rawValue) is not allowed on \(route.template).")
                error.headers[.allow] = route.allowedMethods.joined(separator: ", ")
                // A body that was not read whole is still on the wire: the connection cannot go on.
                return answered(error.response, close: body.isTooLarge)
            }
            guard case .complete(let bytes) = body else {
                return answered(Self.tooLarge(generation.requestBodyLimit), close: true)
            }
            if route.resource.kind == .posts, method == .post || method == .put || method == .patch {
                do {
                    _ = try PostValidation.validate(bytes, method: method, id: route.id)
                } catch {
                    return answered(error.response)
                }
            }
            var headers = fields
            HopByHop.strip(&headers)
            generation.forwarding.strip(&headers)
            headers.setOrAppend(.xRequestID, requestID)
            let record = record ?? RequestRecord()
            // Read per request from the generation it entered: a reload can turn it on or off.
            if generation.trace { record.trace(.serverTiming) }
            let request = ProxyRequest(method: method, route: route, query: query, headers: headers,
                                       body: bytes, client: client, requestID: requestID, record: record)
            // The one place a request meets the chain: the path its plan says, asked once.
            let work: Pending.Work
            switch generation.plan {
            case .immediate(let handler):
                switch handler.answerImmediately(request) {
                case .answer(let response):
                    lease.end()
                    return .answered(finish(request, response), closeConnection: false)
                case .later(let rest):
                    work = .rest(rest, request)
                }
            case .callback(let handler):
                work = .callback(handler, request)
            case .task(let handler):
                work = .task(handler, request)
            }
            return .waiting(Pending(work: work, requestID: requestID, lease: lease))
        }
    }

    /// A stream the admin API gave: its head alone for a HEAD; for a GET the whole stream if
    /// one of the edge's places for streams is free, else 503.
    private func streamed(_ stream: AdminStream, method: HTTPRequest.Method, requestID: String) -> Start {
        let head = Self.stamped(stream.head, requestID)
        guard method == .get else {
            stream.stop()
            return .streamed(StreamedAnswer(head: head, chunks: nil, slots: nil))
        }
        guard streams.take() else {
            stream.stop()
            return .answered(Self.stamped(AdminStreamSlots.busyAnswer(limit: streams.limit), requestID), closeConnection: false)
        }
        return .streamed(StreamedAnswer(head: head, chunks: stream.chunks, slots: streams))
    }

    /// Finishes what ``begin(method:target:fields:body:client:)`` left waiting; its lease
    /// ends with it.
    func complete(_ pending: consuming Pending) async -> (ProxyResponse, closeConnection: Bool) {
        await complete(pending.handOver())
    }

    /// Finishes a request handed to a task, and ends its lease.
    func complete(_ pending: Handed) async -> (ProxyResponse, closeConnection: Bool) {
        defer { pending.lease.end() }
        switch pending.work {
        case .admin(let method, let path, let query, let fields, let body):
            let response = await admin.respond(method: method, path: path, query: query, headers: fields, body: body)
            return (Self.stamped(response, pending.requestID), false)
        case .rest(let rest, let request):
            return (finish(request, await answer(pending) { try await rest() }), false)
        case .callback(let handler, let request):
            // Declined without a task (off the transport's loops): the same answer in one.
            return (finish(request, await answer(pending) { try await handler.handle(request) }), false)
        case .task(let handler, let request):
            return (finish(request, await answer(pending) { try await handler.handle(request) }), false)
        }
    }

    /// The chain's answer to `request` as it goes out: stamped, with CORS headers for a page
    /// of an allowed origin (the edge refused every other Origin), with `Server-Timing` when
    /// its generation traces, and shown to the observer.
    private func finish(_ request: ProxyRequest, _ response: ProxyResponse) -> ProxyResponse {
        var response = Self.stamped(response, request.requestID)
        if request.record.tracing.contains(.serverTiming), let timing = ServerTiming.value(request.record.entries) {
            // Appended: an upstream's own Server-Timing (of a miss) stays, and Veneer's entries follow it.
            response.headers.append(HTTPField(name: .serverTiming, value: timing))
        }
        if let origin = request.headers[.origin] { response = EdgeAccess.withCORS(response, origin: origin) }
        observer?(request, response)
        return response
    }

    /// The chain's answer, or the answer for the error it threw.
    private func answer(_ pending: Handed, _ work: () async throws -> ProxyResponse) async -> ProxyResponse {
        do {
            return try await work()
        } catch {
            return Self.answer(for: error, pending.requestID, logger: logger)
        }
    }

    /// Finishes a request left waiting without a task, if the plan says so and the chain
    /// starts it (``CallbackAnswering/startAnswer(_:then:)``): `delivery` gets what
    /// ``complete(_:)`` would return, on this event loop, possibly before this returns, and
    /// the result is nil. Otherwise nothing started, and the request comes back (with a lease
    /// of its own) for ``complete(_:)``.
    func completeWithoutTask(_ pending: consuming Pending, to delivery: some AnswerDelivery) -> Pending? {
        guard case .callback(let handler, let request) = pending.work else { return pending }
        let requestID = pending.requestID, work = pending.work
        // The callback, called exactly once (CallbackAnswering's contract), ends the lease.
        let lease = pending.lease.handOver()
        let started = handler.startAnswer(request) { [self] result in
            let response: ProxyResponse
            switch result {
            case .success(let answer): response = finish(request, answer)
            case .failure(let error): response = finish(request, Self.answer(for: error, requestID, logger: logger))
            }
            lease.end()
            delivery.deliver(response, closeConnection: false)
        }
        // Declined: the callback never runs; the request goes on in a task, still holding
        // the lease it had (the generation cannot drain in between).
        return started ? nil : Pending(work: work, requestID: requestID, lease: GenerationLease(resuming: lease))
    }

    /// The answer for an error the chain threw: a ``ProxyError`` as it says (its detail
    /// logged with the request id, never sent; a 502 or 504 names the request id in its body
    /// too), anything else `internal` (logged).
    private static func answer(for error: any Error, _ requestID: String, logger: Logger) -> ProxyResponse {
        if let error = error as? ProxyError {
            if let detail = error.detail {
                logger.warning("\(error.message) (\(detail))", metadata: ["request_id": .string(requestID), "error": .string(error.code.rawValue)])
            }
            switch error.code {
            case .upstreamUnavailable, .upstreamTimeout: return error.response(requestID: requestID)
            default: return error.response
            }
        }
        logger.error("request failed inside the chain", metadata: [
            "request_id": .string(requestID), "error_type": .string(String(describing: type(of: error))),
        ])
        return ProxyError.internal.response
    }

    /// `response` with the request id.
    static func stamped(_ response: ProxyResponse, _ requestID: String) -> ProxyResponse {
        var response = response
        if response.headers.contains(.xRequestID) {
            // An upstream that echoes the id it was sent: nothing to change.
            guard response.headers[.xRequestID] != requestID else { return response }
            response.headers[.xRequestID] = requestID
        } else {
            response.headers.append(HTTPField(name: .xRequestID, value: requestID))
        }
        return response
    }

    static func tooLarge(_ limit: Int) -> ProxyResponse {
        ProxyError(.payloadTooLarge, "The body is larger than \(limit) bytes.").response
    }

    /// At most 100 printable ASCII characters of client text, for messages.
    public static func printable(_ text: String) -> String {
        let cleaned = String(decoding: text.utf8.prefix(100).map { $0 >= 0x20 && $0 < 0x7F ? $0 : UInt8(ascii: "?") }, as: UTF8.self)
        return text.utf8.count > 100 ? cleaned + "..." : cleaned
    }
}

extension ProxyEdge.Start {
    /// The request left waiting, if it was (a `switch` does this where the type is not
    /// imported: a noncopyable enum cannot be taken apart across modules).
    consuming func waiting() -> ProxyEdge.Pending? {
        switch consume self {
        case .answered: return nil
        case .streamed: return nil
        case .waiting(let pending): return pending
        }
    }

    /// The answer given without waiting, if it was.
    var answered: (response: ProxyResponse, closeConnection: Bool)? {
        switch self {
        case .answered(let response, let close): return (response, close)
        case .waiting: return nil
        case .streamed: return nil
        }
    }
}

/// Where an answer that comes later goes: the connection that asked for it.
protocol AnswerDelivery: Sendable {
    /// Takes the answer (and whether the connection must close after it).
    func deliver(_ response: ProxyResponse, closeConnection: Bool)
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
