import Crypto
import Foundation
import HTTPTypes
import NIOCore
import VeneerCore

/// `cache`: a shared HTTP cache (RFC 9111) in front of the posts API.
///
/// Reads (GET, HEAD) are answered from the cache while fresh; concurrent misses for one key
/// make one upstream request. Creates and updates are written through (a created post is
/// served from the cache next); PUT, PATCH and DELETE evict the item and every cached list
/// of the collection. Requests with `Authorization` or `Cookie` only ever see responses
/// stored for the same credentials. Every response says what happened in `Cache-Status`.
public struct CacheDecorator: ImmediateAnswering {
    let inner: any Handler
    let options: CacheOptions
    let storage: CacheStorage
    let clock: any VeneerClock
    /// Request headers a caller may set that the edge passes on (`pass_forwarding_headers`):
    /// an origin may reflect them, so they are part of the key.
    let keyedHeaders: [HTTPField.Name]

    init(inner: any Handler, options: CacheOptions, storage: CacheStorage, keyedHeaders: [HTTPField.Name] = []) {
        self.inner = inner
        self.options = options
        self.storage = storage
        self.clock = storage.clock
        self.keyedHeaders = keyedHeaders
    }

    /// A cache answers fresh hits by itself.
    public var answersImmediately: Bool { true }

    /// A hit held in memory at once; anything else (a miss, a lookup in the persistent tier,
    /// a write) as the rest of the work, which carries the key and what the lookup found.
    public func answerImmediately(_ request: ProxyRequest) -> ImmediateAnswer {
        guard request.isRead else { return .later(Deferred { try await self.write(request) }) }
        let key = Self.key(for: request, keyedHeaders: keyedHeaders)
        guard let (stored, varyMiss) = storage.memoryLookup(key, request: request.headers) else {
            return .later(Deferred {
                let (stored, varyMiss) = await self.storage.persistentLookup(key, request: request.headers)
                switch self.read(request, key: key, stored: stored, varyMiss: varyMiss) {
                case .answer(let response): return response
                case .later(let rest): return try await rest()
                }
            })
        }
        return read(request, key: key, stored: stored, varyMiss: varyMiss)
    }

    // MARK: Reads

    /// What the lookup of `key` found makes of a read: a fresh hit or a stale one served
    /// while it is refreshed, at once; else the upstream is asked.
    func read(_ request: ProxyRequest, key: String, stored: CacheEntry?, varyMiss: Bool) -> ImmediateAnswer {
        let now = clock.now()
        if let entry = stored {
            let ttl = entry.ttl(at: now)
            if entry.isFresh(at: now) {
                storage.metrics.count("hit")
                return .answer(hit(entry, request, now: now, status: "hit; ttl=\(Int(ttl.rounded(.down)))"))
            }
            if !entry.noCache, !entry.mustRevalidate, -ttl <= entry.staleWhileRevalidate {
                storage.metrics.count("stale")
                refreshInBackground(request, key: key, entry: entry)
                return .answer(hit(entry, request, now: now, status: "hit; ttl=\(Int(ttl.rounded(.down))); detail=stale-while-revalidate"))
            }
        }
        let reason = stored != nil ? "stale" : (varyMiss ? "vary-miss" : "uri-miss")
        return .later(Deferred { try await self.fetch(request, key: key, stale: stored, reason: reason) })
    }

    /// Asks the upstream (conditionally when a stale copy has validators), with every
    /// concurrent request for the same key waiting for this one.
    func fetch(_ request: ProxyRequest, key: String, stale: CacheEntry?, reason: String) async throws -> ProxyResponse {
        let (flight, leader) = storage.join(key)
        guard leader else {
            switch await flight.wait() {
            case .shared(let response):
                storage.metrics.count("collapsed")
                return finish(response, request, status: "fwd=\(reason); collapsed")
            case .notShared:
                return try await forward(request, key: key, stale: stale, reason: reason).response
            case .failed(let error):
                if let stale, let served = staleIfError(stale, request, status: error.status.code) { return served }
                throw error
            }
        }
        do {
            let (response, shareable) = try await forward(request, key: key, stale: stale, reason: reason)
            storage.finish(key, flight, shareable ? .shared(response) : .notShared)
            return response
        } catch let error as ProxyError {
            storage.finish(key, flight, .failed(error))
            throw error
        } catch {
            storage.finish(key, flight, .notShared)
            throw error
        }
    }

    /// One upstream exchange for a read, and what to store and answer.
    func forward(_ request: ProxyRequest, key: String, stale: CacheEntry?, reason: String) async throws -> (response: ProxyResponse, shareable: Bool) {
        var upstreamRequest = request
        // HEAD is fetched as GET so that the answer can be stored; the edge drops the body.
        upstreamRequest.method = .get
        // The client's own validators are answered here, not forwarded: the cache needs a full response.
        upstreamRequest.headers[.ifNoneMatch] = nil
        upstreamRequest.headers[.ifModifiedSince] = nil
        if let stale {
            if let etag = stale.etag { upstreamRequest.headers[.ifNoneMatch] = etag }
            if let lastModified = stale.lastModified { upstreamRequest.headers[.ifModifiedSince] = lastModified }
        }
        let requestTime = clock.now()
        let response: ProxyResponse
        do {
            response = try await inner.handle(upstreamRequest)
        } catch let error as ProxyError {
            if let stale, let served = staleIfError(stale, request, status: error.status.code) { return (served, false) }
            throw error
        }
        let responseTime = clock.now()

        if response.status == .notModified, var refreshed = stale {
            // RFC 9111 §4.3.4: update the stored headers from the 304 and start a new freshness period.
            let updates = response.headers.fields
            for field in updates where !["content-length", "content-type"].contains(field.name.canonicalName) {
                refreshed.headers[field.name] = updates[values: field.name].joined(separator: ", ")
            }
            if let updated = CachePolicy.entry(status: refreshed.status, headers: refreshed.headers.fields, body: refreshed.body,
                                               request: request, requestTime: requestTime, responseTime: responseTime, options: options) {
                refreshed = updated
                storage.store(key, refreshed)
            }
            storage.metrics.count("revalidated")
            let served = hit(refreshed, request, now: responseTime, status: "fwd=stale; fwd-status=304")
            return (served, true)
        }
        if response.status.code >= 500, let stale, let served = staleIfError(stale, request, status: response.status.code) {
            return (served, false)
        }
        storage.metrics.count("miss")
        if let entry = CachePolicy.entry(status: response.status, headers: response.headers.fields, body: response.body, request: request,
                                         requestTime: requestTime, responseTime: responseTime, options: options) {
            storage.store(key, entry)
            let served = hit(entry, request, now: responseTime, status: "fwd=\(reason); fwd-status=\(response.status.code); stored")
            return (served, true)
        }
        return (finish(response, request, status: "fwd=\(reason); fwd-status=\(response.status.code)"), false)
    }

    func refreshInBackground(_ request: ProxyRequest, key: String, entry: CacheEntry) {
        let decorator = self
        let (flight, leader) = storage.join(key)
        guard leader else { return }
        var request = request
        request.record = RequestRecord()
        // The caller already has its (stale) answer; this refresh belongs to nobody, so it
        // cannot be a child task of the request.
        Task {
            do {
                let (response, shareable) = try await decorator.forward(request, key: key, stale: entry, reason: "stale")
                decorator.storage.finish(key, flight, shareable ? .shared(response) : .notShared)
            } catch let error as ProxyError {
                decorator.storage.finish(key, flight, .failed(error))
            } catch {
                decorator.storage.finish(key, flight, .notShared)
            }
        }
    }

    /// The stored response for a stale-if-error case, if allowed.
    func staleIfError(_ entry: CacheEntry, _ request: ProxyRequest, status: Int) -> ProxyResponse? {
        let now = clock.now()
        guard !entry.mustRevalidate, -entry.ttl(at: now) <= entry.staleIfError else { return nil }
        storage.metrics.count("stale")
        return hit(entry, request, now: now, status: "fwd=stale; fwd-status=\(status); ttl=\(Int(entry.ttl(at: now).rounded(.down))); detail=stale-if-error")
    }

    /// A response from a stored entry: `Age`, `Cache-Status`, and 304 when the client's
    /// validators match.
    func hit(_ entry: CacheEntry, _ request: ProxyRequest, now: Date, status: String) -> ProxyResponse {
        // Stored headers never hold Age or Cache-Status (CachePolicy drops them): appended
        // after the stored fields, which stay shared with the entry.
        var response = ProxyResponse(status: entry.status, headers: entry.headers, body: entry.body)
        let cacheStatus = "veneer; " + status
        response.headers.append(HTTPField(name: .age, value: String(Int(entry.age(at: now).rounded(.down)))))
        response.headers.append(HTTPField(name: .cacheStatus, value: cacheStatus))
        request.record.noteCacheStatus(cacheStatus)
        if CachePolicy.clientValidatorsMatch(request.headers, entry) {
            let headers = response.headers
            var notModified = ProxyHeaders()
            for name in [HTTPField.Name.eTag, .lastModified, .cacheControl, .expires, .vary, .age, .cacheStatus, .date] {
                if let value = headers[name] { notModified[name] = value }
            }
            return ProxyResponse(status: .notModified, headers: notModified)
        }
        return response
    }

    func finish(_ response: ProxyResponse, _ request: ProxyRequest, status: String) -> ProxyResponse {
        var response = response
        let cacheStatus = "veneer; " + status
        if response.headers.contains(.cacheStatus) {
            response.headers[.cacheStatus] = cacheStatus
        } else {
            // Appended, an upstream answer's fields stay as they came.
            response.headers.append(HTTPField(name: .cacheStatus, value: cacheStatus))
        }
        request.record.noteCacheStatus(cacheStatus)
        return response
    }

    // MARK: Writes

    func write(_ request: ProxyRequest) async throws -> ProxyResponse {
        let resource = request.route.resource
        var prefixes = [Self.listPrefix(resource)]
        if let id = request.route.id { prefixes.append(Self.itemPrefix(resource, id)) }
        let response: ProxyResponse
        do {
            response = try await inner.handle(request)
        } catch {
            // The upstream may have applied the change before failing: forget what it concerns.
            await storage.invalidate(prefixes: prefixes)
            throw error
        }
        // Write-through: a created or updated item is stored as the item's GET answer.
        var writtenID: String?
        if (200..<300).contains(response.status.code), response.status != .noContent, request.method != .delete {
            writtenID = request.route.id ?? Self.createdID(response, resource: resource)
            if let id = writtenID { prefixes.append(Self.itemPrefix(resource, id)) }
        }
        await storage.invalidate(prefixes: prefixes)
        storage.metrics.count("bypass")
        if let id = writtenID {
            let now = clock.now()
            var itemRequest = request
            itemRequest.method = .get
            itemRequest.route = .item(resource, id)
            if let entry = CachePolicy.entry(status: .ok, headers: response.headers.fields, body: response.body, request: itemRequest,
                                             requestTime: now, responseTime: now, options: options, writeThrough: true) {
                storage.store(Self.key(for: itemRequest, keyedHeaders: keyedHeaders), entry)
                return finish(response, request, status: "fwd=request; stored")
            }
        }
        return finish(response, request, status: "fwd=request")
    }

    /// The id of a created item: from the body's `id`, else from `Location`.
    static func createdID(_ response: ProxyResponse, resource: Resource) -> String? {
        if let body = try? JSONValue.parse(response.body), let id = body["id"] {
            let text: String?
            switch id {
            case .number(let number): text = number
            case .string(let string): text = string
            default: text = nil
            }
            if let text, let canonical = resource.canonicalID(Substring(text)) { return canonical }
        }
        if let location = response.headers[.location], let last = location.split(separator: "/").last {
            return resource.canonicalID(last.split(separator: "?").first ?? last)
        }
        return nil
    }

    // MARK: Keys

    /// `I /posts/13 q=1 ` or `L /posts a=1&b=2 `: kind, path, sorted query, then the
    /// credentials partition (if any). Lists and items are told apart, and the path ends
    /// with a space, so that a write can drop an item (with any query) and every list by prefix.
    static func key(for request: ProxyRequest, keyedHeaders: [HTTPField.Name] = []) -> String {
        // Built in one string: this runs for every read.
        let name = request.route.resource.name
        let query = sortedQuery(request.query)
        let partition = Self.partition(request.headers)
        var key = ""
        key.reserveCapacity(name.utf8.count + query.utf8.count + partition.utf8.count + 32)
        appendPrefix(request.route.resource, id: request.route.id, to: &key)
        key += query
        key += " "
        key += partition
        for name in keyedHeaders {
            let values = request.headers[values: name]
            guard !values.isEmpty else { continue }
            key += " " + name.canonicalName + "=" + JSONText.quoted(values.joined(separator: "\n"))
        }
        return key
    }

    static func itemPrefix(_ resource: Resource, _ id: String) -> String {
        var prefix = ""
        appendPrefix(resource, id: id, to: &prefix)
        return prefix
    }

    static func listPrefix(_ resource: Resource) -> String {
        var prefix = ""
        appendPrefix(resource, id: nil, to: &prefix)
        return prefix
    }

    /// `I /posts/7 ` for an item, `L /posts ` for the list: the start of every key of the
    /// route, which invalidation removes by.
    private static func appendPrefix(_ resource: Resource, id: String?, to key: inout String) {
        if let id {
            key += "I /"
            key += resource.name
            key += "/"
            key += id
        } else {
            key += "L /"
            key += resource.name
        }
        key += " "
    }

    static func sortedQuery(_ query: String?) -> String {
        guard let query, !query.isEmpty else { return "" }
        let pairs = query.split(separator: "&", omittingEmptySubsequences: true)
        if pairs.count < 2 { return query }
        return pairs.sorted().joined(separator: "&")
    }

    /// "" without credentials, else a SHA-256 of `Authorization` and `Cookie`: a caller
    /// only ever gets responses stored for its own credentials (which are never stored).
    static func partition(_ headers: HTTPFields) -> String {
        let authorization = headers[values: .authorization]
        let cookies = headers[values: .cookie]
        guard !authorization.isEmpty || !cookies.isEmpty else { return "" }
        var hasher = SHA256()
        hasher.update(data: Array(("authorization:" + authorization.joined(separator: "\n") + "\ncookie:" + cookies.joined(separator: "; ")).utf8))
        return "#" + hasher.finalize().map { String(format: "%02x", $0) }.joined()
    }
}
