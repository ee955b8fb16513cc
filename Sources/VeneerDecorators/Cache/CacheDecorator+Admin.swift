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

    /// One stored response as `/-/cache` shows it, request data cut by ``RequestRedaction``'s
    /// rule: the credentials part of the key, sensitive query values, credential headers
    /// among the stored ones and the `Vary` values (a `Vary: Authorization` entry keeps its
    /// caller's `Authorization` value) become fingerprints, which still tell callers apart.
    static func describe(_ entry: CacheEntry, key: String, tier: String, at now: Date) -> JSONValue {
        let rule = RequestRedaction.shown
        var members: [(String, JSONValue)] = [
            ("key", .string(shownKey(key))), ("tier", .string(tier)), ("status", .int(Int(entry.code))),
            ("age", .int(Int.clamping(entry.age(at: now), to: .min ... .max))), ("ttl", .int(Int.clamping(entry.ttl(at: now), to: .min ... .max))),
            ("fresh", .bool(entry.isFresh(at: now))), ("stored_at", .string(Timestamp.iso8601(entry.responseTime))),
            ("size", .int(entry.size)), ("credentials", .bool(key.contains("#"))),
            ("headers", .object(entry.headers.map { ($0.name.rawName, .string(rule.header($0.name.rawName, $0.value))) })),
        ]
        if !entry.vary.isEmpty {
            members.append(("vary", .object(entry.vary.map { field in
                (field.name, field.value.map { .string(rule.header(field.name, $0)) } ?? .null)
            })))
        }
        if let part = entry.part { members.append(("part", .object([("first", .int(part.first)), ("complete", .int(part.complete))]))) }
        return .object(members)
    }

    /// A key as `/-/cache` shows it (see ``CacheKey``): `I/posts/1 QUERY[ NAME=LENGTH:VALUE...] [#PARTITION]`
    /// with the query and the keyed fields' values through the rule, and the partition (a
    /// hash of the caller's credentials) as a fingerprint of it.
    static func shownKey(_ key: String) -> String {
        let rule = RequestRedaction.shown
        var body = Substring(key)
        var partition = ""
        if body.hasSuffix(" ") {
            body = body.dropLast()
        } else if let space = body.lastIndex(of: " "), body[body.index(after: space)...].hasPrefix("#") {
            partition = String(body[body.index(after: space)...])
            body = body[..<space]
        }
        guard let pathEnd = body.firstIndex(of: " ") else { return rule.cut(key) }
        var shown = String(body[...pathEnd])
        let rest = body[body.index(after: pathEnd)...]
        let queryEnd = rest.firstIndex(of: " ") ?? rest.endIndex
        shown += rule.query(rest[..<queryEnd])
        var extras = Array(rest[queryEnd...].utf8)[...]
        // ` NAME=LENGTH:VALUE`, length-prefixed (a value may hold spaces).
        while !extras.isEmpty {
            guard extras.first == UInt8(ascii: " "), let equals = extras.firstIndex(of: UInt8(ascii: "=")),
                  let colon = extras[equals...].firstIndex(of: UInt8(ascii: ":")),
                  let length = Int(String(decoding: extras[(equals + 1)..<colon], as: UTF8.self)), length >= 0,
                  extras.endIndex - (colon + 1) >= length else {
                shown += " " + rule.cut(String(decoding: extras, as: UTF8.self))
                break
            }
            let name = String(decoding: extras[(extras.startIndex + 1)..<equals], as: UTF8.self)
            let value = String(decoding: extras[(colon + 1)..<(colon + 1 + length)], as: UTF8.self)
            shown += " \(name)=\(rule.header(name, value))"
            extras = extras[(colon + 1 + length)...]
        }
        shown += " "
        if !partition.isEmpty { shown += "#" + RequestRedaction.fingerprint(partition) }
        return shown
    }

    static func noStore(_ value: JSONValue) -> ProxyResponse {
        var body = value.buffer
        body.writeStaticString("\n")
        return .json(.ok, body, headers: [.cacheControl: "no-store"])
    }
}
