import HTTPTypes
import NIOCore
import VeneerCore

/// The `mock` origin: an in-memory posts API (and any other collection the environment
/// exposes), answering like a small JSON REST server. Created posts get ids from 1 up;
/// every item carries an `ETag` so that revalidation can be tried against it.
public struct MockOrigin: Handler, ReadsRequestBodies {
    let collections: MockCollections
    let latency: Duration
    let clock: any VeneerClock

    /// Creates a mock origin; pass the same ``MockOriginState`` to keep its items across a reload.
    public init(state: MockOriginState, latency: Duration = .zero, clock: any VeneerClock = SystemClock()) {
        self.collections = state.collections
        self.latency = latency
        self.clock = clock
    }

    /// Answers like the real posts API would; the time it took (its `latency` included)
    /// goes into the request's record.
    public func handle(_ request: ProxyRequest) async throws -> ProxyResponse {
        let start = clock.monotonic()
        defer { request.record.noteOrigin("mock", time: clock.monotonic() - start) }
        if latency > .zero { try await clock.sleep(for: latency) }
        let resource = request.route.resource
        switch (request.route.target, request.method) {
        case (.list, .get), (.list, .head):
            let items = collections.list(resource.name).filter { Self.matches($0, query: request.query) }
            return .json(.ok, JSONValue.array(items).buffer)
        case (.list, .post):
            let item = try parse(request, id: nil)
            guard let (created, version) = collections.create(resource, item) else {
                return error(.conflict, "conflict", "An item with this id already exists.")
            }
            let id = MockCollections.idText(created["id"]) ?? ""
            var headers: ProxyHeaders = [.location: "/\(resource.name)/\(id)"]
            headers[.eTag] = Self.etag(id, version)
            return .json(.created, created.buffer, headers: headers)
        case (.item(let id), .get), (.item(let id), .head):
            guard let (item, version) = collections.get(resource.name, id: id) else { return notFound(resource, id) }
            let etag = Self.etag(id, version)
            if let tags = request.headers[.ifNoneMatch], tags.split(separator: ",").contains(where: { $0.trimmingSpaces == etag || $0.trimmingSpaces == "*" }) {
                return ProxyResponse(status: .notModified, headers: [.eTag: etag])
            }
            return .json(.ok, item.buffer, headers: [.eTag: etag])
        case (.item(let id), .put), (.item(let id), .patch):
            let body = try parse(request, id: id)
            guard let (item, version) = collections.update(resource, id: id, body, merge: request.method == .patch) else {
                return notFound(resource, id)
            }
            return .json(.ok, item.buffer, headers: [.eTag: Self.etag(id, version)])
        case (.item(let id), .delete):
            guard collections.delete(resource.name, id: id) else { return notFound(resource, id) }
            return ProxyResponse(status: .noContent)
        default:
            return error(.methodNotAllowed, "method_not_allowed", "\(request.method.rawValue) is not allowed here.",
                         headers: [.allow: request.route.allowedMethods.joined(separator: ", ")])
        }
    }

    func parse(_ request: ProxyRequest, id: String?) throws -> JSONValue {
        if request.route.resource.kind == .posts {
            return try PostValidation.validate(request.body, method: request.method, id: id)
        }
        guard let value = try? JSONValue.parse(request.body), case .object = value else {
            throw ProxyError.badRequest("The body must be a JSON object.")
        }
        return value
    }

    func notFound(_ resource: Resource, _ id: String) -> ProxyResponse {
        let noun = resource.name == "posts" ? "post" : "item of \(resource.name)"
        return error(.notFound, "not_found", "No \(noun) with id \(id).")
    }

    func error(_ status: HTTPResponse.Status, _ code: String, _ message: String, headers: ProxyHeaders = [:]) -> ProxyResponse {
        .json(status, JSONValue.object([("error", .string(code)), ("message", .string(message))]).buffer, headers: headers)
    }

    static func etag(_ id: String, _ version: Int) -> String { "\"\(id)-\(version)\"" }

    /// `?field=value` filters on top-level members, compared as text.
    static func matches(_ item: JSONValue, query: String?) -> Bool {
        guard let query, !query.isEmpty else { return true }
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = parts[0].removingPercentEncodingLeniently
            guard !key.isEmpty, !key.hasPrefix("_") else { continue }
            let expected = parts.count > 1 ? parts[1].removingPercentEncodingLeniently : ""
            guard let actual = item[key] else { return false }
            switch actual {
            case .string(let text): if text != expected { return false }
            case .number(let text): if text != expected { return false }
            case .bool(let flag): if String(flag) != expected { return false }
            default: return false
            }
        }
        return true
    }
}

/// The items of a mock origin, kept apart from the origin so that a reload can carry them over.
public final class MockOriginState: Sendable {
    let collections: MockCollections

    /// State seeded with `seed` (items per collection name).
    public init(seed: [String: [JSONValue]] = [:]) {
        collections = MockCollections(seed: seed)
    }
}

extension Substring {
    /// `+` as space and `%XX` decoded; invalid escapes kept as they are.
    var removingPercentEncodingLeniently: String {
        var bytes: [UInt8] = []
        var index = utf8.startIndex
        while index < utf8.endIndex {
            let byte = utf8[index]
            if byte == UInt8(ascii: "%"), let high = utf8.index(index, offsetBy: 1, limitedBy: utf8.endIndex), high < utf8.endIndex,
               let low = utf8.index(index, offsetBy: 2, limitedBy: utf8.endIndex), low < utf8.endIndex,
               let value = UInt8(String(decoding: [utf8[high], utf8[low]], as: UTF8.self), radix: 16) {
                bytes.append(value)
                index = utf8.index(index, offsetBy: 3)
                continue
            }
            bytes.append(byte == UInt8(ascii: "+") ? 0x20 : byte)
            index = utf8.index(after: index)
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
