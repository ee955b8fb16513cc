import Foundation
import HTTPTypes
import NIOCore
import VeneerCore

/// The rules of RFC 9111 for a shared cache: what may be stored, for how long, and when a
/// client's own validators make a 304.
enum CachePolicy {
    /// Statuses that are heuristically cacheable (RFC 9110 §15.1), so `ttl` applies to them.
    static let heuristicStatuses: Set<Int> = [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501]

    /// The entry to store for a response, or nil when it must not be stored.
    static func entry(status: HTTPResponse.Status, headers: HTTPFields, body: ByteBuffer, request: ProxyRequest,
                      requestTime: Date, responseTime: Date, options: CacheOptions, writeThrough: Bool = false) -> CacheEntry? {
        let code = status.code
        guard code >= 200, code != 206, code != 304 else { return nil }
        guard body.readableBytes <= options.maxEntrySize else { return nil }
        let control = CacheControl(headers)
        guard !control.noStore, !control.isPrivate, headers[.setCookie] == nil else { return nil }
        let varyNames = headers[values: .vary].flatMap { $0.split(separator: ",") }.map { $0.trimmingSpaces.lowercased() }.filter { !$0.isEmpty }
        guard !varyNames.contains("*") else { return nil }
        // RFC 9111 §3.5: a response to a request with Authorization only when explicitly shareable.
        if request.headers[.authorization] != nil, !(control.isPublic || control.sharedMaxAge != nil || control.mustRevalidate) {
            return nil
        }

        let lifetime: Double
        if let override = options.ttlOverride {
            lifetime = override.seconds
        } else if let shared = control.sharedMaxAge {
            lifetime = Double(shared)
        } else if let maxAge = control.maxAge {
            lifetime = Double(maxAge)
        } else if let expires = headers[.expires] {
            // An invalid Expires (such as "0") means already expired.
            let date = headers[.date].flatMap { HTTPDate.parse($0) } ?? responseTime
            lifetime = HTTPDate.parse(expires).map { max(0, $0.timeIntervalSince(date)) } ?? 0
        } else if heuristicStatuses.contains(code) || (writeThrough && code == 200) {
            lifetime = options.ttl.seconds
        } else {
            return nil
        }

        // RFC 9111 §4.2.3: the age it already had when it arrived.
        let dateValue = headers[.date].flatMap { HTTPDate.parse($0) } ?? responseTime
        let apparentAge = max(0, responseTime.timeIntervalSince(dateValue))
        let ageValue = headers[.age].flatMap { Double($0.trimmingSpaces) } ?? 0
        let correctedAge = ageValue + max(0, responseTime.timeIntervalSince(requestTime))
        // A fresh list of its own size: the one parsed off a connection has room to spare,
        // which a stored entry would carry for its whole life. Left out: what each answer
        // gets anew (Age, Cache-Status, and the X-Request-Id of the request that filled it).
        var stored = HTTPFields()
        stored.reserveCapacity(headers.count)
        for field in headers where field.name != .age && field.name != .cacheStatus && field.name != .connection && field.name != .xRequestID {
            stored.append(field)
        }
        return CacheEntry(
            status: status, headers: ProxyHeaders(shared: stored), body: compact(body), responseTime: responseTime,
            initialAge: max(apparentAge, correctedAge), lifetime: lifetime,
            noCache: control.noCache,
            mustRevalidate: control.mustRevalidate || control.proxyRevalidate || control.sharedMaxAge != nil,
            staleIfError: max(options.staleIfError.seconds, Double(control.staleIfError ?? 0)),
            staleWhileRevalidate: max(options.staleWhileRevalidate.seconds, Double(control.staleWhileRevalidate ?? 0)),
            vary: varyNames.map { ($0, CacheEntry.varyValue(request.headers, $0)) })
    }

    /// Whether the client's `If-None-Match` (weak comparison) or, without it,
    /// `If-Modified-Since` says its copy is current (RFC 9110 §13.1).
    static func clientValidatorsMatch(_ request: HTTPFields, _ entry: CacheEntry) -> Bool {
        guard entry.status == .ok else { return false }
        if let tags = request[.ifNoneMatch] {
            guard let etag = entry.etag else { return false }
            let mine = weak(etag)
            return tags.split(separator: ",").contains { tag in
                let tag = tag.trimmingSpaces
                return tag == "*" || weak(String(tag)) == mine
            }
        }
        if let since = request[.ifModifiedSince].flatMap({ HTTPDate.parse($0) }), let modified = entry.lastModified.flatMap({ HTTPDate.parse($0) }) {
            return modified <= since
        }
        return false
    }

    static func weak(_ tag: String) -> String { tag.hasPrefix("W/") ? String(tag.dropFirst(2)) : tag }

    /// The body in storage of its own size. A body read off a connection is a slice of the
    /// read buffer (kilobytes for a few hundred bytes of answer): stored as it is, it would
    /// keep that whole buffer alive for as long as the entry lives.
    static func compact(_ body: ByteBuffer) -> ByteBuffer {
        guard body.storageCapacity > body.readableBytes + 64 else { return body }
        var copy = ByteBufferAllocator().buffer(capacity: body.readableBytes)
        copy.writeImmutableBuffer(body)
        return copy
    }
}
