import Foundation
import HTTPTypes
@_spi(CustomByteBufferAllocator) import NIOCore
import VeneerCore

/// The rules of RFC 9111 for a shared cache: what may be stored, for how long, and when a
/// client's own validators make a 304.
enum CachePolicy {
    /// Statuses that are heuristically cacheable (RFC 9110 §15.1): stored without explicit
    /// freshness, with `ttl`.
    static let heuristicStatuses: Set<Int> = [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501]

    /// Statuses whose caching rules Veneer implements, those RFC 9110 defines: a response
    /// with `must-understand` is stored only with one of these (RFC 9111 §5.2.2.3).
    static let understoodStatuses: Set<Int> = Set(200...206).union(300...305).union([307, 308]).union(400...417)
        .union([421, 422, 426]).union(500...505)

    /// Fields never stored: each answer gets its own (Age, Cache-Status, the X-Request-Id and
    /// the upstream's Server-Timing of the exchange that filled it), hop-by-hop ones, and
    /// Veneer's own targeted field. A stored part (206) keeps its range apart, not its
    /// `Content-Range` (each hit says which bytes it answers); any other status keeps the
    /// field as it came (RFC 9111 §3.1: a cache stores the header fields it received).
    static let unstoredFields: [HTTPField.Name] = [.age, .cacheStatus, .connection, .xRequestID, .serverTiming, .veneerCacheControl]
    static let unstoredFieldsOfParts = unstoredFields + [.contentRange]

    /// The entry to store for a response, or nil when it must not be stored.
    static func entry(status: HTTPResponse.Status, headers: ProxyHeaders, body: ByteBuffer, request: ProxyRequest,
                      requestTime: Date, responseTime: Date, options: CacheOptions, writeThrough: Bool = false) -> CacheEntry? {
        let code = status.code
        guard code >= 200, code != 304, body.readableBytes <= options.maxEntrySize else { return nil }
        let (control, isTargeted) = CacheControl.governing(headers, targeted: options.targetedFields)
        // RFC 9111 §5.2.2.3: must-understand overrides no-store, for status codes understood.
        if control.mustUnderstand {
            guard understoodStatuses.contains(code) else { return nil }
        } else if control.noStore {
            return nil
        }
        // Set-Cookie is never stored, whatever the upstream says (see the README).
        guard !control.isPrivate, !headers.contains(.setCookie) else { return nil }
        let varyNames = headers[values: .vary].flatMap { $0.split(separator: ",") }.map { $0.trimmingSpaces.lowercased() }.filter { !$0.isEmpty }
        guard !varyNames.contains("*") else { return nil }
        // RFC 9111 §3.5: a response to a request with Authorization only when explicitly shareable.
        if request.headers[.authorization] != nil, !(control.isPublic || control.sharedMaxAge != nil || control.mustRevalidate) {
            return nil
        }
        // RFC 9111 §3.3: a part of a response (one range of a known length, with a strong
        // validator to combine it by) may be stored, so long as the whole would fit.
        var part: CacheEntry.Part?
        if code == 206 {
            guard let range = headers[.contentRange].flatMap(ContentRange.parse), let complete = range.complete,
                  range.last - range.first + 1 == body.readableBytes, complete <= options.maxEntrySize,
                  let tag = headers[.eTag], !tag.hasPrefix("W/") else { return nil }
            part = CacheEntry.Part(first: range.first, complete: complete)
        }

        let reference = responseTime
        let date = headers[values: .date].first.flatMap { HTTPDate.parse($0, reference: reference) }
        let lifetime: Double
        if let override = options.ttlOverride {
            lifetime = override.seconds
        } else if let shared = control.sharedMaxAge {
            lifetime = Double(shared)
        } else if let maxAge = control.maxAge {
            lifetime = Double(maxAge)
        } else if !isTargeted, let expires = headers[values: .expires].first {
            // RFC 9111 §5.3: an invalid Expires (such as "0"), or more than one, means already expired.
            let parsed = headers[values: .expires].count == 1 ? HTTPDate.parse(expires, reference: reference) : nil
            lifetime = parsed.map { max(0, $0.timeIntervalSince(date ?? responseTime)) } ?? 0
        } else if heuristicStatuses.contains(code) || control.isPublic || (writeThrough && code == 200) {
            switch options.ttl {
            case .duration(let ttl):
                lifetime = ttl.seconds
            case .heuristic:
                lifetime = heuristicLifetime(headers, date: date ?? responseTime, max: options.heuristicMax, reference: reference)
            }
        } else {
            return nil
        }

        // RFC 9111 §4.2.3: the age it already had when it arrived.
        let apparentAge = max(0, responseTime.timeIntervalSince(date ?? responseTime))
        let ageValue = Double(CacheControl.age(headers[values: .age]) ?? 0)
        let correctedAge = ageValue + max(0, responseTime.timeIntervalSince(requestTime))
        let stored = headers.sharedCopy(removing: code == 206 ? unstoredFieldsOfParts : unstoredFields)
        let headerBytes = stored.textSize
        return CacheEntry.make(
            code: code, headers: stored, body: compact(body), responseTime: responseTime,
            initialAge: max(apparentAge, correctedAge), lifetime: lifetime,
            noCache: control.noCache,
            mustRevalidate: control.mustRevalidate || control.proxyRevalidate || control.sharedMaxAge != nil,
            fromWrite: writeThrough,
            staleIfError: max(options.staleIfError.seconds, Double(control.staleIfError ?? 0)),
            staleWhileRevalidate: max(options.staleWhileRevalidate.seconds, Double(control.staleWhileRevalidate ?? 0)),
            vary: varyNames.map { ($0, CacheEntry.varyValue(request.headers, $0)) }, part: part, headerBytes: headerBytes)
    }

    /// RFC 9111 §4.2.2: a tenth of the time between `Last-Modified` and `Date`, at most
    /// `max`; none without a valid `Last-Modified` before `Date`.
    static func heuristicLifetime(_ headers: ProxyHeaders, date: Date, max limit: Duration, reference: Date) -> Double {
        guard let text = headers[values: .lastModified].first, let modified = HTTPDate.parse(text, reference: reference), modified < date else {
            return 0
        }
        return min(date.timeIntervalSince(modified) / 10, limit.seconds)
    }

    /// Whether the client's `If-None-Match` (weak comparison) or, without it,
    /// `If-Modified-Since` says its copy is current (RFC 9110 §13.1). `If-Modified-Since` is
    /// compared with `Last-Modified`, or with `Date` when there is none (RFC 9110 §13.1.3,
    /// RFC 9111 §4.3.2), or with the time the response was received.
    static func clientValidatorsMatch(_ request: HTTPFields, _ entry: CacheEntry) -> Bool {
        guard entry.code == 200 else { return false }
        // The usual request has neither validator: two looks, no lists made (a list of the
        // values of each, empty, cost a hit some 300 instructions).
        if request.contains(.ifNoneMatch) {
            let tags = request[values: .ifNoneMatch]
            guard let etag = entry.etag else { return false }
            let mine = weak(etag)
            return tags.lazy.flatMap { $0.split(separator: ",") }.contains { tag in
                let tag = tag.trimmingSpaces
                return tag == "*" || weak(String(tag)) == mine
            }
        }
        // RFC 9110 §13.1.3: one valid HTTP-date, or the field is ignored.
        guard request.contains(.ifModifiedSince) else { return false }
        let since = request[values: .ifModifiedSince]
        guard since.count == 1, let date = HTTPDate.parse(since[0]) else { return false }
        let modified = entry.lastModified.flatMap { HTTPDate.parse($0) } ?? entry.headers[values: .date].first.flatMap { HTTPDate.parse($0) }
            ?? entry.responseTime
        return modified <= date
    }

    static func weak(_ tag: String) -> String { tag.hasPrefix("W/") ? String(tag.dropFirst(2)) : tag }

    /// The body in storage of exactly its own size. A body read off a connection is a slice
    /// of the read buffer (kilobytes for a few hundred bytes of answer), and a buffer made by
    /// `ByteBufferAllocator` rounds its capacity up to a power of two: stored as it is, a
    /// body would keep that room for as long as the entry lives. The copy is made with
    /// `malloc`, which the default allocator's `free` releases.
    static func compact(_ body: ByteBuffer) -> ByteBuffer {
        let count = body.readableBytes
        guard count > 0, body.storageCapacity > count + 8, let memory = malloc(count) else { return body }
        let exact = UnsafeMutableRawBufferPointer(start: memory, count: count)
        body.withUnsafeReadableBytes { exact.copyMemory(from: $0) }
        return ByteBuffer(takingOwnershipOf: exact, allocator: ByteBufferAllocator())
    }
}
