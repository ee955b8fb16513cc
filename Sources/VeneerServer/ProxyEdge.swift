import HTTPTypes
import Logging
import NIOCore
import VeneerCore
import VeneerHTTP1

/// The server edge: the only place where HTTP requests become ``ProxyRequest``s and errors
/// become HTTP responses. Each request goes through three steps, each a function of its
/// inputs with tests of its own:
///
/// 1. **admit** (``admit(method:target:fields:authority:localPort:requestID:)``): the request
///    id, the lease on the generation the request enters, the route table it is read with,
///    and the checks of the `Host` and the `Origin` (``EdgeAccess``);
/// 2. **resolve** (``resolve(_:raw:method:fields:body:client:requestID:record:in:servesAdmin:adminOnly:)``):
///    the route, the method, the body and (for posts) its validation, or the admin API and
///    who may ask it; the outcome is a ``ProxyRequest`` for the chain, a call of the admin API,
///    or a refusal;
/// 3. **dispatch** (``dispatch(_:in:)-swift.method``): the chain, the way its plan says
///    (``ChainPlan``), asked once; or the admin API, streamed or answered.
///
/// Whether the connection goes on after an answer is not the edge's to say: a request whose
/// body was not read whole (``IncomingBody/tooLarge``) is its connection's last, whatever
/// answers it (``ServerConnectionStateMachine/requestParsed(_:keepAlive:bodyBytes:now:)``).
///
/// A class of immutable parts, one per listener: every connection asks it per request, and a
/// value of a dozen references was copied out of the connection's handler for each (callgrind).
public final class ProxyEdge: Sendable {
    let chain: any ChainSource
    let admin: any AdminResponder
    let logger: Logger
    /// Whether this listener is the separate admin listener (`admin: {listen: ...}`).
    let adminOnly: Bool
    /// Whether `/-/` is served on this listener.
    let servesAdmin: Bool
    /// Whether this listener is a Unix socket: no web page reaches one, and its clients name
    /// whatever Host their URL had, so the Host is not checked (its file's mode says who may connect).
    let unixSocket: Bool
    /// Where the connections report each answer they write (``AnswerObserver``).
    let sinks: AnswerObserver.Sinks
    /// The streamed admin answers being written (``AdminStream``), shared by the copies of this edge.
    let streams: AdminStreamSlots
    /// What request bodies are reserved from before they are read (`limits.buffered`).
    let buffers: BufferBudget

    /// An edge answering through `chain`, with `admin` under `/-/` when `servesAdmin` (and
    /// nothing else when `adminOnly`, the separate admin listener). Its connections write one
    /// line per answer to `accessLog`, count answers in `metrics` and add the chain's answers
    /// to `feed`, refusals included where they say so (see ``AnswerObserver``), and give the
    /// spans of sampled requests to `telemetry`.
    public init(chain: any ChainSource, admin: any AdminResponder, logger: Logger, adminOnly: Bool, servesAdmin: Bool,
                accessLog: AccessLog? = nil, metrics: EdgeMetrics? = nil, feed: RequestFeed? = nil, buffers: BufferBudget = .unbounded,
                unixSocket: Bool = false, telemetry: (any SpanSink)? = nil) {
        self.chain = chain
        self.unixSocket = unixSocket
        self.admin = admin
        self.logger = logger
        self.adminOnly = adminOnly
        self.servesAdmin = servesAdmin
        sinks = AnswerObserver.Sinks(accessLog: accessLog, metrics: metrics, feed: feed, telemetry: telemetry)
        streams = AdminStreamSlots()
        self.buffers = buffers
    }

    /// The request's id: its `X-Request-Id` when that is reasonable, else a new one.
    @inline(__always)
    static func requestID(_ fields: HTTPFields) -> String {
        if let given = fields.ifPresent(.xRequestID), RequestID.isAcceptable(given) { return given }
        return RequestID.generate()
    }

    /// The body limit of the chain serving new requests.
    var requestBodyLimit: Int { chain.current.requestBodyLimit }

    /// Whether the body of a request with this head streams to the chain rather than being
    /// read whole, decided at the head: a method other than GET and HEAD, on a resource
    /// declared `body: stream` that allows it, in a chain that reads no request body whole
    /// (``ServingChain/streamsRequestBodies``). Posts (validated) and the admin API never do.
    func streamsBody(method: HTTPRequest.Method, target: String) -> Bool {
        guard method != .get, method != .head, !adminOnly else { return false }
        let generation = chain.current
        guard generation.streamsRequestBodies,
              case .route(let route, _) = RequestTarget.parse(target, resources: generation.resources) else { return false }
        return route.resource.streamsBodies && route.allows(method)
    }

    /// The route template `target` names (`/posts/{id}`, `/-/` for the admin API), as
    /// ``resolve(_:raw:method:fields:body:client:requestID:record:in:servesAdmin:adminOnly:)`` notes
    /// it; nil for a path that names none. For a request refused before it reached the edge.
    func routeTemplate(_ target: String) -> String? {
        switch RequestTarget.parse(target, resources: adminOnly ? [] : chain.current.resources) {
        case .admin: return "/-/"
        case .route(let route, _): return route.template
        case .badID, .badQuery, .notFound: return nil
        }
    }

    /// What ``begin(method:target:fields:body:client:authority:localPort:record:requestID:)``
    /// made of a request. Not copyable: a request left waiting carries its lease.
    enum Start: ~Copyable, Sendable {
        /// Answered without waiting: refused by the edge, or answered at once by the chain
        /// (``ChainPlan/immediate(_:)``, a fresh cache hit).
        case answered(ProxyResponse)
        /// To be finished by ``complete(_:)-swift.method`` (or ``completeWithoutTask(_:to:)``).
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
            case admin(AdminCall)
            /// The rest of an answer the chain could not give at once.
            case rest(Deferred, ProxyRequest)
            /// To start by callback (``ChainPlan/callback(_:)``); in a task if that is declined.
            case callback(any CallbackAnswering, ProxyRequest)
            /// To answer in a task.
            case task(any Handler, ProxyRequest)
        }
        let work: Work
        let requestID: String
        /// Taken by ``admit(method:target:fields:authority:localPort:requestID:)``.
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

    /// The part of answering that needs no `await`: admit, resolve and dispatch, and the
    /// chain's answer if it has one at once. A connection handler answers what comes back
    /// `.answered` without starting a task. `authority` is the request's Host (nil without
    /// one), `localPort` the port it came to. A connection that observes its requests passes
    /// their `record` (the route is noted in it) and their `requestID` (``requestID(_:)``),
    /// which its own lines about them then share.
    @inline(__always)
    func begin(method: HTTPRequest.Method, target: String, fields: HTTPFields, body: IncomingBody,
               client: ClientAddress?, authority: String? = nil, localPort: Int? = nil, record: RequestRecord? = nil,
               requestID given: String? = nil, peer: PeerIdentity? = nil) -> Start {
        let admitted: Admitted
        switch admit(method: method, target: target, fields: fields, authority: unixSocket ? nil : authority, localPort: localPort ?? 0, requestID: given) {
        case .refused(let refusal): return .answered(refusal)
        case .admitted(let admission): admitted = admission
        }
        let resolution = Self.resolve(admitted.target, raw: target, method: method, fields: fields, body: body, client: client,
                                      requestID: admitted.requestID, record: record, in: admitted.lease.chain,
                                      servesAdmin: servesAdmin, adminOnly: adminOnly, peer: peer)
        switch resolution {
        case .refused(let refusal): return .answered(admitted.outgoing(refusal))
        case .admin(let call): return dispatch(call, admitted)
        case .chain(let request): return dispatch(request, in: admitted)
        }
    }

    /// Finishes what ``begin(method:target:fields:body:client:authority:localPort:record:requestID:)``
    /// left waiting; its lease ends with it.
    func complete(_ pending: consuming Pending) async -> ProxyResponse {
        await complete(pending.handOver())
    }

    /// Finishes a request handed to a task, and ends its lease.
    func complete(_ pending: Handed) async -> ProxyResponse {
        defer { pending.lease.end() }
        switch pending.work {
        case .admin(let call):
            let response = await admin.respond(method: call.method, path: call.path, query: call.query, headers: call.fields, body: call.body)
            return Self.stamped(response, pending.requestID)
        case .rest(let rest, let request):
            return finish(request, await answer(pending) { try await rest() })
        case .callback(let handler, let request):
            // Declined without a task (off the transport's loops): the same answer in one.
            return finish(request, await answer(pending) { try await handler.handle(request) })
        case .task(let handler, let request):
            return finish(request, await answer(pending) { try await handler.handle(request) })
        }
    }

    /// The chain's answer to `request` as it goes out: stamped, with CORS headers for a page
    /// of an allowed origin (admit refused every other Origin), and with `Server-Timing` when
    /// its generation traces.
    @inline(__always)
    func finish(_ request: ProxyRequest, _ response: consuming ProxyResponse) -> ProxyResponse {
        Self.stamp(&response, request)
        if request.record.tracing.contains(.serverTiming), let timing = ServerTiming.value(request.record.entries) {
            // Appended: an upstream's own Server-Timing (of a miss) stays, and Veneer's entries follow it.
            response.headers.append(HTTPField(name: .serverTiming, value: timing))
        }
        // Moved out, not copied: returned as it stood, the answer was copied out of the
        // parameter and the parameter destroyed (callgrind).
        guard let origin = request.headers.ifPresent(.origin) else { return consume response }
        return EdgeAccess.withCORS(response, origin: origin)
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
    /// ``complete(_:)-swift.method`` would return, on this event loop, possibly before this
    /// returns, and the result is nil. Otherwise nothing started, and the request comes back
    /// (with a lease of its own) for ``complete(_:)-swift.method``.
    func completeWithoutTask(_ pending: consuming Pending, to delivery: some AnswerDelivery) -> Pending? {
        guard case .callback(let handler, let request) = pending.work else { return pending }
        let requestID = pending.requestID
        // The callback, called exactly once (CallbackAnswering's contract), ends the lease.
        let lease = pending.lease.handOver()
        let started = handler.startAnswer(request) { [self] result in
            let response: ProxyResponse
            switch result {
            case .success(let answer): response = finish(request, answer)
            case .failure(let error): response = finish(request, Self.answer(for: error, requestID, logger: logger))
            }
            lease.end()
            delivery.deliver(response)
        }
        // Declined: the callback never runs; the request goes on in a task, still holding
        // the lease it had (the generation cannot drain in between).
        // (Its work made again of its parts: the work kept aside for this was copied for every request.)
        return started ? nil : Pending(work: .callback(handler, request), requestID: requestID, lease: GenerationLease(resuming: lease))
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
    @inline(__always)
    static func stamped(_ response: consuming ProxyResponse, _ requestID: String) -> ProxyResponse {
        stamp(&response, requestID)
        return response
    }

    /// Gives `response` the request id, in place: a copy of the whole answer to change
    /// (`var response = response`) cost a retain and a release of each part (callgrind).
    /// `field`, when given, is appended rather than a field made again from the id, whose value
    /// `HTTPField.init` checks byte by byte (some 250 instructions an answer).
    @inline(__always)
    static func stamp(_ response: inout ProxyResponse, _ requestID: String, reusing field: HTTPField? = nil) {
        if response.headers.contains(.xRequestID) {
            // An upstream that echoes the id it was sent: nothing to change.
            guard response.headers[.xRequestID] != requestID else { return }
            response.headers[.xRequestID] = requestID
        } else {
            response.headers.append(field ?? HTTPField(name: .xRequestID, value: requestID))
        }
    }

    /// The stamp for the answer to `request`, reusing the request's own `X-Request-Id` field
    /// when it is the one resolve appended last: this id, spelled as Veneer spells the name (a
    /// caller's kept field in another case is not echoed in its spelling).
    @inline(__always)
    static func stamp(_ response: inout ProxyResponse, _ request: ProxyRequest) {
        if let last = request.headers.last, last.name.rawName == "X-Request-Id", last.value == request.requestID {
            stamp(&response, request.requestID, reusing: last)
        } else {
            stamp(&response, request.requestID)
        }
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
    var answered: ProxyResponse? {
        switch self {
        case .answered(let response): return response
        case .waiting: return nil
        case .streamed: return nil
        }
    }
}

/// Where an answer that comes later goes: the connection that asked for it.
protocol AnswerDelivery: Sendable {
    /// Takes the answer.
    func deliver(_ response: ProxyResponse)
}

/// A request body as the connection read it: whole, or refused for its size (declared or
/// actual) without reading the rest, which is then still on the wire: such a request is its
/// connection's last (the one rule for closing after a refusal, kept by the connection's
/// state machine: the handler reports the request as not keeping the connection alive).
///
/// `overBudget`: its declared body did not fit in `limits.buffered` and was not read (503).
/// A complete body holds its share of that budget (`reservation`) for as long as it is held.
///
/// `streamed`: the body streams to the chain as it arrives (``ProxyEdge/streamsBody(method:target:)``).
enum IncomingBody: Sendable {
    case complete(ByteBuffer, reservation: BufferBudget.Reservation? = nil)
    case tooLarge
    case overBudget
    case streamed(BodyStream)
}
