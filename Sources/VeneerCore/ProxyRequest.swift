import HTTPTypes
import NIOCore
import Synchronization

/// A request as every handler sees it: typed route, buffered body.
///
/// The server edge builds it after checking the path, the method and the body, so a
/// handler never sees a route it does not know or a post body that is not a post.
///
/// A value, stored in one box that copies share until one of them changes (copy on write):
/// a request passes through the edge and every decorator, and copying its ten parts at each
/// step cost a cache hit some 2,000 instructions and two dozen retains (callgrind).
public struct ProxyRequest: Sendable {
    /// The parts, shared by copies until one changes.
    private final class Storage: @unchecked Sendable {
        // Changed only through a request that holds the only reference (see `unique`):
        // a shared box is never written, so reading it from any thread is safe.
        var method: HTTPRequest.Method
        var route: ResourceRoute
        var query: String?
        var headers: HTTPFields
        var body: ByteBuffer
        var stream: BodyStream?
        var client: ClientAddress?
        var peer: PeerIdentity?
        var requestID: String
        var record: RequestRecord

        init(method: HTTPRequest.Method, route: ResourceRoute, query: String?, headers: HTTPFields, body: ByteBuffer, stream: BodyStream?,
             client: ClientAddress?, peer: PeerIdentity?, requestID: String, record: RequestRecord) {
            self.method = method
            self.route = route
            self.query = query
            self.headers = headers
            self.body = body
            self.stream = stream
            self.client = client
            self.peer = peer
            self.requestID = requestID
            self.record = record
        }

        func copy() -> Storage {
            Storage(method: method, route: route, query: query, headers: headers, body: body, stream: stream, client: client, peer: peer,
                    requestID: requestID, record: record)
        }
    }

    private var storage: Storage

    /// The box, made this request's own first if a copy shares it.
    private var unique: Storage {
        mutating get {
            if !isKnownUniquelyReferenced(&storage) { storage = storage.copy() }
            return storage
        }
    }

    /// The method (`GET`, `HEAD`, `POST`, `PUT`, `PATCH`, `DELETE`).
    public var method: HTTPRequest.Method {
        get { storage.method }
        set { unique.method = newValue }
    }

    /// The parsed route.
    public var route: ResourceRoute {
        get { storage.route }
        set { unique.route = newValue }
    }

    /// The raw query string without `?`, as the client sent it (checked for legal characters), or nil.
    public var query: String? {
        get { storage.query }
        set { unique.query = newValue }
    }

    /// The end-to-end request headers (hop-by-hop fields already removed).
    public var headers: HTTPFields {
        get { storage.headers }
        _modify {
            let box = unique
            yield &box.headers
        }
        set { unique.headers = newValue }
    }

    /// The whole request body (empty when there is none, or when it streams: ``stream``).
    public var body: ByteBuffer {
        get { storage.body }
        _modify {
            let box = unique
            yield &box.body
        }
        set { unique.body = newValue }
    }

    /// The body when it streams instead of arriving whole (a route nothing needs the body of:
    /// see the README's "Streamed bodies"); nil when ``body`` holds it. A stream is read once:
    /// whoever sends the request on takes it, and a copy of the request shares it.
    public var stream: BodyStream? {
        get { storage.stream }
        set { unique.stream = newValue }
    }

    /// The address of the client that sent the request, if known.
    public var client: ClientAddress? {
        get { storage.client }
        set { unique.client = newValue }
    }

    /// Who sent the request, as the kernel says (``PeerIdentity``): set on a Unix socket
    /// listener, and on loopback TCP with `peer_identity: true`; nil otherwise. A decorator
    /// may key on it (`block_list`'s `uids`, `groups` and `units` do).
    public var peer: PeerIdentity? {
        get { storage.peer }
        set { unique.peer = newValue }
    }

    /// The request id: the client's `X-Request-Id` or a generated one.
    public var requestID: String {
        get { storage.requestID }
        set { unique.requestID = newValue }
    }

    /// What the chain did with the request, noted by its decorators for the edge (copies of
    /// the request share it). Work that belongs to no request, such as a background
    /// refresh, gets a record of its own.
    public var record: RequestRecord {
        get { storage.record }
        set { unique.record = newValue }
    }

    /// Creates a request.
    public init(
        method: HTTPRequest.Method,
        route: ResourceRoute,
        query: String? = nil,
        headers: HTTPFields = [:],
        body: ByteBuffer = ByteBuffer(),
        client: ClientAddress? = nil,
        peer: PeerIdentity? = nil,
        requestID: String = RequestID.generate(),
        record: RequestRecord = RequestRecord()
    ) {
        storage = Storage(method: method, route: route, query: query, headers: headers, body: body, stream: nil, client: client, peer: peer,
                          requestID: requestID, record: record)
    }

    /// The route's path plus `?query` when there is one: what goes to the upstream.
    public var pathAndQuery: String {
        guard let query, !query.isEmpty else { return route.path }
        return route.path + "?" + query
    }

    /// GET or HEAD.
    public var isRead: Bool { method == .get || method == .head }

    /// Whether the body streams (``stream``): it cannot be sent twice.
    public var isStreamed: Bool { stream != nil }
}

/// Request ids: the caller's, or 13 random-looking characters (`0-9a-v`).
public enum RequestID {
    /// A fresh id: a per-process random seed and a counter through the splitmix64 mixer,
    /// unique within the process and unpredictable enough for correlation (not a secret),
    /// without a getrandom(2) call per request. The 64 bits are written in base 32, 13
    /// characters: a string of at most 15 bytes is held inline, without an allocation per
    /// request (16 hex digits needed one).
    public static func generate() -> String {
        var value = counter.wrappingAdd(0x9E37_79B9_7F4A_7C15, ordering: .relaxed).newValue
        value = (value ^ (value >> 30)) &* 0xBF58_476D_1CE4_E5B9
        value = (value ^ (value >> 27)) &* 0x94D0_49BB_1331_11EB
        value ^= value >> 31
        let digits: StaticString = "0123456789abcdefghijklmnopqrstuv"
        return String(unsafeUninitializedCapacity: length) { bytes in
            digits.withUTF8Buffer { alphabet in
                for index in (0..<length).reversed() {
                    bytes[index] = alphabet[Int(value & 0x1F)]
                    value >>= 5
                }
            }
            return length
        }
    }

    /// The length of a generated id: 13 base-32 digits hold 64 bits.
    public static let length = 13

    private static let counter = Atomic<UInt64>(UInt64.random(in: .min ... .max))

    /// Whether a caller's id is safe to pass on and log: 1 to 200 visible ASCII characters.
    public static func isAcceptable(_ id: String) -> Bool {
        let utf8 = id.utf8
        return !utf8.isEmpty && utf8.count <= 200 && utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }
    }
}
