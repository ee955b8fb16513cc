import HTTPTypes

/// A collection that an environment exposes, such as `posts` or `comments`.
public struct Resource: Hashable, Sendable, CustomStringConvertible {
    /// How ids of a resource look and how its bodies are treated.
    public enum Kind: String, Hashable, Sendable {
        /// Integer ids; bodies are validated as posts (`title` and `body` strings).
        case posts
        /// Integer ids; bodies passed through untouched.
        case integer
        /// Ids of letters, digits, `-`, `_`, `.`, `~`; bodies passed through untouched.
        case string
    }

    /// The collection name, the first path segment.
    public let name: String
    /// How ids and bodies of this collection are checked.
    public let kind: Kind
    /// Whether request bodies of this collection stream to the upstream as they arrive
    /// (`{ name: uploads, body: stream }`) instead of being read whole first: never for
    /// `posts`, whose bodies are validated. The chain may still want them whole (a decorator
    /// or an origin that reads request bodies): see the README's "Streamed bodies".
    public let streamsBodies: Bool

    /// Creates a resource.
    public init(name: String, kind: Kind, streamsBodies: Bool = false) {
        self.name = name
        self.kind = kind
        self.streamsBodies = streamsBodies && kind != .posts
    }

    /// The typed `posts` resource of DESIGN.md.
    public static let posts = Resource(name: "posts", kind: .posts)

    /// Whether ids are integers.
    public var hasIntegerIDs: Bool { kind != .string }

    /// `posts`, `comments (string ids)` or `uploads (string ids, bodies stream)`.
    public var description: String {
        let streams = streamsBodies ? ", bodies stream" : ""
        switch kind {
        case .posts: return name
        case .integer: return "\(name) (integer ids\(streams))"
        case .string: return "\(name) (string ids\(streams))"
        }
    }

    /// Checks a raw path segment as an id of this resource and returns its canonical form.
    ///
    /// Integer ids are positive integers written as ASCII digits without a leading zero, that
    /// fit an `Int`: `0`, `00` and `01` are refused, never rewritten (an upstream may read
    /// `01` as another item than `1`, and the path sent is the one the caller wrote). String
    /// ids are 1 to 200 characters of RFC 3986 "unreserved" characters, and never `.` or `..`
    /// (which an upstream would resolve).
    public func canonicalID(_ raw: Substring) -> String? {
        var raw = raw
        return raw.withUTF8 { canonicalID(bytes: $0) }
    }

    /// ``canonicalID(_:)`` of a segment's UTF-8 bytes, checked where they are and made into
    /// a text once (the edge's way for every request: a text made first, then a substring,
    /// then the text again, cost some 500 instructions).
    package func canonicalID(bytes: UnsafeBufferPointer<UInt8>) -> String? {
        if hasIntegerIDs {
            guard let first = bytes.first, first >= UInt8(ascii: "1"), first <= UInt8(ascii: "9"), bytes.count <= 19 else { return nil }
            // Digits that fit an Int (19 digits may not).
            var value = 0
            for byte in bytes {
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                let (times, over) = value.multipliedReportingOverflow(by: 10)
                let (sum, overAgain) = times.addingReportingOverflow(Int(byte - UInt8(ascii: "0")))
                guard !over, !overAgain else { return nil }
                value = sum
            }
            return String(decoding: bytes, as: UTF8.self)
        }
        guard !bytes.isEmpty, bytes.count <= 200, bytes.allSatisfy(Resource.isUnreserved) else { return nil }
        // `.` and `..`, which an upstream would resolve.
        if bytes.count <= 2, bytes.allSatisfy({ $0 == UInt8(ascii: ".") }) { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    @inline(__always)
    static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"),
             UInt8(ascii: "."), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }
}

/// The typed route of a request: a collection, or one item of it.
///
/// Veneer never forwards the path the client sent: it forwards ``path``, rebuilt from the
/// parsed route, so `..`, encoded slashes or parameters cannot reach the upstream.
public struct ResourceRoute: Hashable, Sendable, CustomStringConvertible {
    /// What the route names.
    public enum Target: Hashable, Sendable {
        /// The collection itself: `/posts`.
        case list
        /// One item: `/posts/{id}` (canonical id).
        case item(String)
    }

    /// The collection.
    public let resource: Resource
    /// The collection or one of its items.
    public let target: Target

    /// Creates a route.
    public init(resource: Resource, target: Target) {
        self.resource = resource
        self.target = target
    }

    /// `GET /posts` and friends.
    public static func list(_ resource: Resource) -> ResourceRoute {
        ResourceRoute(resource: resource, target: .list)
    }

    /// `GET /posts/{id}` and friends; the id must already be canonical.
    public static func item(_ resource: Resource, _ id: String) -> ResourceRoute {
        ResourceRoute(resource: resource, target: .item(id))
    }

    /// The id of an item route.
    public var id: String? {
        if case .item(let id) = target { return id }
        return nil
    }

    /// The canonical path: `/posts` or `/posts/13`.
    public var path: String { Self.text(length: pathLength, appendPath) }

    /// The route template, for logs and metrics: `/posts` or `/posts/{id}`.
    public var template: String { Self.text(length: templateLength, appendTemplate) }

    /// How many bytes ``appendPath(to:)`` writes.
    public var pathLength: Int { 1 + resource.name.utf8.count + (id.map { 1 + $0.utf8.count } ?? 0) }

    /// How many bytes ``appendTemplate(to:)`` writes.
    public var templateLength: Int { 1 + resource.name.utf8.count + (id == nil ? 0 : 5) }

    /// Writes ``path`` without making it: a log line or a request head written in one pass
    /// takes the route's pieces (making the text first cost some 300 instructions a request).
    package func appendPath(to out: inout ByteCursor) {
        out.append(byte: UInt8(ascii: "/"))
        out.append(resource.name)
        if case .item(let id) = target {
            out.append(byte: UInt8(ascii: "/"))
            out.append(id)
        }
    }

    /// Writes ``template`` without making it.
    package func appendTemplate(to out: inout ByteCursor) {
        out.append(byte: UInt8(ascii: "/"))
        out.append(resource.name)
        if case .item = target { out.append("/{id}") }
    }

    /// A text written in one pass: every request asks for its template (and a forwarded one
    /// for its path), and concatenating the pieces cost some 500 instructions (callgrind). Up
    /// to 15 bytes the text is held inline, without an allocation. The pieces are copied whole
    /// where their bytes are contiguous (a byte loop over a `UTF8View` cost some 30
    /// instructions a byte).
    private static func text(length: Int, _ write: (inout ByteCursor) -> Void) -> String {
        String(unsafeUninitializedCapacity: length) { bytes in
            var cursor = ByteCursor(UnsafeMutableRawBufferPointer(bytes), reserved: length)
            write(&cursor)
            return cursor.offset
        }
    }

    /// Whether `method` is one of ``allowedMethods`` (without building the list).
    public func allows(_ method: HTTPRequest.Method) -> Bool {
        switch method {
        case .get, .head: return true
        case .post: return target == .list
        case .put, .patch, .delete: return target != .list
        default: return false
        }
    }

    /// The methods this route answers, in `Allow` order.
    public var allowedMethods: [String] {
        switch target {
        case .list: return ["GET", "HEAD", "POST"]
        case .item: return ["GET", "HEAD", "PUT", "PATCH", "DELETE"]
        }
    }

    /// Same as ``path``.
    public var description: String { path }
}
