import Foundation
import HTTPTypes
import NIOCore
import Synchronization

/// A request to an admin route contributed by a decorator (`/-/NAME[/REST]`).
public struct AdminRequest: Sendable {
    /// The method.
    public let method: HTTPRequest.Method
    /// What follows `/-/NAME/` (empty for `/-/NAME`).
    public let rest: String
    /// The query string, without `?`.
    public let query: String?
    /// The body.
    public let body: ByteBuffer
    /// The request's headers.
    public let headers: HTTPFields

    /// Creates a request.
    public init(method: HTTPRequest.Method, rest: String, query: String? = nil, body: ByteBuffer = ByteBuffer(), headers: HTTPFields = [:]) {
        self.method = method
        self.rest = rest
        self.query = query
        self.body = body
        self.headers = headers
    }

    /// The percent-decoded value of query parameter `name` (`+` is a space), if present.
    public func parameter(_ name: String) -> String? {
        Self.value(of: name, in: query)
    }

    /// Whether the body is an HTML form's (`application/x-www-form-urlencoded`), as the
    /// status page's buttons send.
    public var isForm: Bool {
        headers[.contentType]?.lowercased().hasPrefix("application/x-www-form-urlencoded") == true
    }

    /// The percent-decoded value of form field `name`, if the body is a form that has it.
    public func formValue(_ name: String) -> String? {
        guard isForm else { return nil }
        return Self.value(of: name, in: String(buffer: body))
    }

    /// Whether the client asked for HTML (a browser): such a client is sent back to the
    /// status page (`303 See Other`) after a form's change, a program gets JSON.
    public var acceptsHTML: Bool {
        headers[.accept]?.lowercased().contains("text/html") == true
    }

    /// The value of `name` in `application/x-www-form-urlencoded` text.
    static func value(of name: String, in text: String?) -> String? {
        guard let query = text else { return nil }
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts[0] == name[...] else { continue }
            let raw = parts.count > 1 ? String(parts[1]).replacingOccurrences(of: "+", with: " ") : ""
            return raw.removingPercentEncoding ?? raw
        }
        return nil
    }
}

/// Admin routes that decorators add under `/-/` (such as `/-/blocks`), per chain: a
/// reload replaces them with the new chain's.
public final class AdminRoutes: Sendable {
    /// Answers one admin request.
    public typealias Route = @Sendable (AdminRequest) async -> ProxyResponse

    /// One endpoint of a route, as `GET /-/` lists it: its path (`/-/blocks/{account}`), its
    /// methods, and what each method does.
    public struct Endpoint: Sendable, Equatable {
        /// The path, with `{name}` for a part the caller fills in.
        public let path: String
        /// The methods it answers (GET also answers HEAD).
        public let methods: [HTTPRequest.Method]
        /// What each method does, in a sentence or two.
        public let summary: String

        /// Creates an endpoint.
        public init(path: String, methods: [HTTPRequest.Method], summary: String) {
            self.path = path
            self.methods = methods
            self.summary = summary
        }
    }

    private struct Registered {
        var route: Route
        var endpoints: [Endpoint]
    }

    private let routes = Mutex<[String: Registered]>([:])

    /// No routes.
    public init() {}

    /// Adds a route, answering `/-/NAME` and `/-/NAME/...`, with the `endpoints` it answers
    /// (what the index lists). When two decorators add the same name, both answer: a GET
    /// returns their JSON lists joined, anything else the first answer that is not 404.
    public func register(_ name: String, endpoints: [Endpoint], _ route: @escaping Route) {
        routes.withLock { routes in
            guard let existing = routes[name] else {
                routes[name] = Registered(route: route, endpoints: endpoints)
                return
            }
            let first = existing.route
            let combined: Route = { request in
                let firstAnswer = await first(request)
                let second = await route(request)
                if request.method == .get, case .array(let a)? = try? JSONValue.parse(firstAnswer.body),
                   case .array(let b)? = try? JSONValue.parse(second.body) {
                    return .json(.ok, JSONValue.array(a + b).buffer)
                }
                return firstAnswer.status == .notFound ? second : firstAnswer
            }
            routes[name] = Registered(route: combined, endpoints: existing.endpoints + endpoints.filter { !existing.endpoints.contains($0) })
        }
    }

    /// The route called `name`.
    public func route(_ name: String) -> Route? { routes.withLock { $0[name]?.route } }

    /// The names, sorted.
    public var names: [String] { routes.withLock { $0.keys.sorted() } }

    /// Every endpoint of every route, by name, each once.
    public var endpoints: [Endpoint] { routes.withLock { routes in routes.keys.sorted().flatMap { routes[$0]!.endpoints } } }
}
