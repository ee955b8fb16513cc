import HTTPTypes
import NIOCore

/// Where an outbound request goes: scheme, host, port and an optional path prefix, parsed
/// once from configuration so that the hot path never parses a URL.
public struct Endpoint: Hashable, Sendable, CustomStringConvertible {
    /// `http` or `https`.
    public let scheme: String
    /// Host name or address (IPv6 without brackets).
    public let host: String
    /// TCP port.
    public let port: Int
    /// Path prefix without a trailing slash (`""` or `/v1`).
    public let basePath: String
    /// The `Host` header value: host, plus the port when it is not the scheme's default.
    public let authority: String

    /// Creates an endpoint.
    public init(scheme: String, host: String, port: Int, basePath: String) {
        self.scheme = scheme
        self.host = host
        self.port = port
        self.basePath = basePath
        let name = host.contains(":") ? "[\(host)]" : host
        authority = port == (scheme == "https" ? 443 : 80) ? name : "\(name):\(port)"
    }

    /// Parses `http(s)://host[:port][/prefix]`; nil for anything else (user info, query,
    /// fragment, other schemes).
    public init?(url: String) {
        let lower = url.lowercased()
        let scheme: String
        if lower.hasPrefix("http://") { scheme = "http" } else if lower.hasPrefix("https://") { scheme = "https" } else { return nil }
        var rest = url.dropFirst(scheme.count + 3)
        guard !rest.contains("?"), !rest.contains("#"), !rest.contains("@"), !rest.contains(" ") else { return nil }
        var path = ""
        if let slash = rest.firstIndex(of: "/") {
            path = String(rest[slash...])
            rest = rest[..<slash]
        }
        while path.hasSuffix("/") { path.removeLast() }
        var host = String(rest)
        var port = scheme == "https" ? 443 : 80
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return nil }
            let after = host[host.index(after: close)...]
            let inner = String(host[host.index(after: host.startIndex)..<close])
            if after.hasPrefix(":") {
                guard let value = Int(after.dropFirst()), (1...65535).contains(value) else { return nil }
                port = value
            } else if !after.isEmpty {
                return nil
            }
            host = inner
        } else if let colon = host.lastIndex(of: ":") {
            guard let value = Int(host[host.index(after: colon)...]), (1...65535).contains(value) else { return nil }
            port = value
            host = String(host[..<colon])
        }
        guard !host.isEmpty else { return nil }
        self.init(scheme: scheme, host: host, port: port, basePath: path)
    }

    /// `scheme://authority/prefix`.
    public var description: String { "\(scheme)://\(authority)\(basePath)" }
}

/// A request that leaves Veneer: to the upstream, or to a token endpoint.
public struct OutboundRequest: Sendable {
    /// The method.
    public var method: HTTPRequest.Method
    /// Where it goes.
    public var endpoint: Endpoint
    /// The path sent, starting with `/`: the endpoint's prefix and the request's path (the
    /// query apart when ``query`` is set). Setting it clears ``route``.
    public var target: String {
        get { storedRoute.map { endpoint.basePath + $0.path } ?? storedTarget }
        set {
            storedTarget = newValue
            storedRoute = nil
        }
    }
    /// ``target`` when no ``route`` stands for it.
    @usableFromInline
    var storedTarget: String
    /// The upstream origin's request: ``target`` is the endpoint's prefix and this route's
    /// canonical path, written from their parts by the pooled transport (no string made of
    /// them per request) and joined only for a reader of ``target``; nil: ``target`` as set.
    /// Given at creation only: cleared alone, it would leave the empty target it stands for
    /// (setting ``target`` clears it).
    public var route: ResourceRoute? { storedRoute }
    /// ``route``.
    @usableFromInline
    var storedRoute: ResourceRoute?
    /// A query sent after ``target`` and a `?` (``target`` then has none), kept apart so that
    /// a short path and the caller's query need no string built of both; nil: none.
    public var query: String?
    /// End-to-end headers; the transport sets `Host` and `Content-Length`.
    public var headers: HTTPFields
    /// An `X-Forwarded-For` field sent after ``headers`` (which then have none): the client's
    /// address, added without copying the caller's fields; nil: none.
    public var forwardedFor: String?
    /// The trace fields sent with it (`telemetry`): the transport writes them in place of any
    /// `traceparent` and `tracestate` in ``headers`` (which then go as the caller sent them,
    /// uncopied); nil: ``headers`` go as they are.
    public var trace: OutgoingTrace?
    /// The body, if any.
    public var body: ByteBuffer?
    /// A body that streams instead (``ProxyRequest/stream``): sent with its `Content-Length`
    /// when known, else chunked, as its parts come; ``body`` is nil then.
    public var bodyStream: BodyStream?
    /// How long the exchange may take: from the request's head to the answer's head, or, for a
    /// request body that streams over the pooled transport, from the body's end (while it is
    /// sent, an upstream that takes nothing for the body timeout ends it).
    public var timeout: Duration
    /// The largest response body accepted whole; more is an error (`upstream_unavailable`).
    public var maxResponseBodySize: Int
    /// Response bodies of unknown length, and those longer than this, may come as a
    /// ``BodyStream`` (``ProxyResponse/stream``) on a transport that streams; nil: always whole.
    public var streamThreshold: Int?
    /// The longest pause of a streamed body while a part is wanted (`limits.body_timeout`).
    public var bodyTimeout: Duration = .seconds(30)
    /// `limits.buffered`: an answer a transport that streams would read whole (under
    /// ``streamThreshold``) reserves its length there first; one the budget has no room for
    /// streams instead (it then holds a few buffers, not its length). Nil: nothing reserved.
    public var buffers: BufferBudget?

    /// Creates a request.
    @inlinable
    public init(method: HTTPRequest.Method, endpoint: Endpoint, target: String, headers: HTTPFields = [:],
                body: ByteBuffer? = nil, timeout: Duration, maxResponseBodySize: Int = 16 << 20) {
        self.method = method
        self.endpoint = endpoint
        storedTarget = target
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.maxResponseBodySize = maxResponseBodySize
    }

    /// Creates a request with every part given: one value built in place (the upstream origin
    /// makes one per request, and setting parts after ``init(method:endpoint:target:headers:body:timeout:maxResponseBodySize:)``
    /// copied the whole value twice).
    @inlinable
    package init(method: HTTPRequest.Method, endpoint: Endpoint, target: String, query: String?, headers: HTTPFields, forwardedFor: String?,
                 body: ByteBuffer?, bodyStream: BodyStream?, timeout: Duration, maxResponseBodySize: Int, streamThreshold: Int?,
                 bodyTimeout: Duration, buffers: BufferBudget?, trace: OutgoingTrace? = nil, route: ResourceRoute? = nil) {
        self.method = method
        self.endpoint = endpoint
        storedTarget = target
        storedRoute = route
        self.query = query
        self.headers = headers
        self.forwardedFor = forwardedFor
        self.body = body
        self.bodyStream = bodyStream
        self.timeout = timeout
        self.maxResponseBodySize = maxResponseBodySize
        self.streamThreshold = streamThreshold
        self.bodyTimeout = bodyTimeout
        self.buffers = buffers
        self.trace = trace
    }

    /// ``target`` followed by `?` and ``query`` when there is one: what follows the endpoint's prefix.
    public var pathAndQuery: String {
        guard let query else { return target }
        return target + "?" + query
    }
}

/// The thing that does outbound HTTP I/O (kept apart from the decorators that only intercept).
///
/// Implementations throw ``ProxyError`` `upstream_unavailable` when the peer cannot be
/// reached or breaks the exchange, and `upstream_timeout` when ``OutboundRequest/timeout`` passes.
/// They mark with ``ProxyError/requestNeverSent`` the failures that prove that no byte of
/// the request was written (a refused connection, a failed TLS handshake, a deadline that
/// passed while it waited for a connection); every other failure may have reached the peer.
///
/// A conformance writes ``OutboundRequest/trace`` when it is set, in place of the caller's
/// `traceparent` and `tracestate` (``OutgoingTrace/replaces(_:)``): the trace is not among
/// ``OutboundRequest/headers``.
public protocol HTTPTransport: Sendable {
    /// Sends one request and returns the whole response; redirects are returned, not followed.
    /// The request is `consuming`: a transport that keeps it keeps the caller's, uncopied
    /// (a conformance may take it borrowed all the same).
    func send(_ request: consuming OutboundRequest) async throws -> ProxyResponse

    /// Whether ``start(_:then:)`` can ever send to `endpoint` without a task (asked once,
    /// when a chain is built).
    func startsWithoutTask(to endpoint: Endpoint) -> Bool

    /// ``send(_:)`` without a task, where the transport can (called on one of its event
    /// loops): `done` gets the outcome once, on that loop, and the answer is true; false
    /// means nothing was sent. A failure is a ``ProxyError``, as ``send(_:)`` throws (typed
    /// loosely so that a caller hands the outcome on as it is, without making a new one).
    func start(_ request: consuming OutboundRequest, then done: @escaping @Sendable (Result<ProxyResponse, any Error>) -> Void) -> Bool
}

extension HTTPTransport {
    /// Never without a task.
    public func startsWithoutTask(to endpoint: Endpoint) -> Bool { false }

    /// Only ``send(_:)``.
    public func start(_ request: consuming OutboundRequest, then done: @escaping @Sendable (Result<ProxyResponse, any Error>) -> Void) -> Bool {
        false
    }
}

/// Connection settings that transports are shared by.
public struct TransportOptions: Hashable, Sendable {
    /// How long establishing a connection may take.
    public var connectTimeout: Duration
    /// Connections per event loop and host; nil lets the client decide.
    public var connectionsPerLoop: Int?

    /// Creates options.
    public init(connectTimeout: Duration = .seconds(2), connectionsPerLoop: Int? = nil) {
        self.connectTimeout = connectTimeout
        self.connectionsPerLoop = connectionsPerLoop
    }
}

/// Hands out transports, one shared pool per distinct ``TransportOptions``, and owns their shutdown.
public protocol TransportProvider: Sendable {
    /// The transport for these options.
    func transport(_ options: TransportOptions) -> any HTTPTransport
}
