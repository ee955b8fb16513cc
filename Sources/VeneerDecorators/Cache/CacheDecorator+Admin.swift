import Foundation
import HTTPTypes
import NIOCore
import VeneerCore

extension CacheDecorator {
    /// The store namespace a cache with a persistent store keeps its entries in.
    public static let storeNamespace = CacheStorage.namespace

    /// The start of every cache key stored for `path` (`/posts/1`, `/posts`, `/posts?userId=1`):
    /// every query and every caller's credentials for a path without a query, that query
    /// alone otherwise; nil when `path` is not a path of `resources`.
    public static func keyPrefix(forPath path: String, resources: [Resource]) -> String? {
        let (target, query) = path.firstIndex(of: "?").map { (path[..<$0], String(path[path.index(after: $0)...])) } ?? (path[...], "")
        guard target.hasPrefix("/") else { return nil }
        let segments = target.dropFirst().split(separator: "/", omittingEmptySubsequences: false)
        guard let resource = resources.first(where: { $0.name[...] == segments[0] }) else { return nil }
        var prefix: String
        switch segments.count {
        case 1:
            prefix = CacheKey.listPrefix(resource)
        case 2:
            guard let id = resource.canonicalID(segments[1]) else { return nil }
            prefix = CacheKey.itemPrefix(resource, id)
        default:
            return nil
        }
        // The sorted query, then the space that ends it in every key.
        if !query.isEmpty { prefix += CacheKey.sortedQuery(query) + " " }
        return prefix
    }

    /// `/-/cache`: `GET ?path=` shows what is stored for a path (headers, age, key), `DELETE
    /// ?path=` removes it, `DELETE` without a path removes everything, in both tiers.
    static func admin(_ request: AdminRequest, storage: CacheStorage, resources: [Resource], clock: any VeneerClock) async -> ProxyResponse {
        let path = request.parameter("path")
        let prefix: String
        if let path {
            guard let found = keyPrefix(forPath: path, resources: resources) else {
                let known = resources.map { "/\($0.name), /\($0.name)/{id}" }.joined(separator: ", ")
                return ProxyError.badRequest("\(path) is not a path this cache stores (\(known)).").response
            }
            prefix = found
        } else {
            prefix = ""
        }
        switch request.method {
        case .get, .head:
            guard let path else { return ProxyError.badRequest("Name what to show: GET /-/cache?path=/posts/1.").response }
            let now = clock.now()
            let stored = await storage.inspect(prefix: prefix)
            guard !stored.isEmpty else { return ProxyError.notFound("Nothing is cached for \(path).").response }
            var listed: [JSONValue] = []
            for (key, entries, tier) in stored {
                for entry in entries { listed.append(describe(entry, key: key, tier: tier, at: now)) }
            }
            return noStore(.array(listed))
        case .delete:
            let removed = await storage.invalidate(prefixes: [prefix])
            return noStore(.object([
                ("path", path.map(JSONValue.string) ?? .null), ("removed_from_memory", .int(removed.memory)),
                ("removed_from_store", .int(removed.store)),
            ]))
        default:
            var error = ProxyError(.methodNotAllowed, "Use GET /-/cache?path=PATH, DELETE /-/cache?path=PATH or DELETE /-/cache.")
            error.headers[.allow] = "GET, HEAD, DELETE"
            return error.response
        }
    }

    /// One stored response as `/-/cache` shows it. The credentials part of a key is cut
    /// short: it only tells entries of different callers apart.
    static func describe(_ entry: CacheEntry, key: String, tier: String, at now: Date) -> JSONValue {
        var shownKey = key
        if let hash = key.lastIndex(of: "#"), key.distance(from: hash, to: key.endIndex) > 9 {
            shownKey = String(key[...key.index(hash, offsetBy: 8)]) + "…"
        }
        var members: [(String, JSONValue)] = [
            ("key", .string(shownKey)), ("tier", .string(tier)), ("status", .int(Int(entry.code))),
            ("age", .int(Int.clamping(entry.age(at: now), to: .min ... .max))), ("ttl", .int(Int.clamping(entry.ttl(at: now), to: .min ... .max))),
            ("fresh", .bool(entry.isFresh(at: now))), ("stored_at", .string(Timestamp.iso8601(entry.responseTime))),
            ("size", .int(entry.size)), ("credentials", .bool(key.contains("#"))),
            ("headers", .object(entry.headers.map { ($0.name.rawName, .string($0.value)) })),
        ]
        if !entry.vary.isEmpty {
            members.append(("vary", .object(entry.vary.map { ($0.name, $0.value.map(JSONValue.string) ?? .null) })))
        }
        if let part = entry.part { members.append(("part", .object([("first", .int(part.first)), ("complete", .int(part.complete))]))) }
        return .object(members)
    }

    static func noStore(_ value: JSONValue) -> ProxyResponse {
        var body = value.buffer
        body.writeStaticString("\n")
        return .json(.ok, body, headers: [.cacheControl: "no-store"])
    }
}
