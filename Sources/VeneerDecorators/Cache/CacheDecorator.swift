import Foundation
import HTTPTypes
import NIOCore
import VeneerCore

/// `cache`: a shared HTTP cache (RFC 9111) in front of the posts API.
///
/// Reads (GET, HEAD) are answered from the cache while fresh; concurrent misses for one key
/// make one upstream request. Creates and updates are written through when their answer is
/// shown to be the item (a created post is served from the cache next); successful writes
/// evict the item and every cached list of the collection. Requests with `Authorization` or
/// `Cookie` only ever see responses stored for the same credentials. Every response says
/// what happened in `Cache-Status`.
public struct CacheDecorator: ImmediateAnswering {
    let inner: any Handler
    let options: CacheOptions
    let storage: CacheStorage
    let clock: any VeneerClock
    /// Request headers a caller may set that the edge passes on (`pass_forwarding_headers`):
    /// an origin may reflect them, so they are part of the key.
    let keyedHeaders: [HTTPField.Name]
    /// Request fields that address a decorator rather than the upstream (``BuildContext/requestDirectives``,
    /// such as a fault decorator's): a request carrying one gets an answer of its own.
    let directives: [HTTPField.Name]
    /// Where a stale entry's refresh runs once its caller has the stale answer (the runtime's
    /// drain waits for it).
    let backgroundWork: any BackgroundWork
    /// `limits.buffered`: the copy of a streamed answer kept to be stored takes its share.
    var buffers = BufferBudget.unbounded
    /// Where the spans of a background refresh go (``BuildContext/spans``, `telemetry`).
    var spans: (any SpanSink)?
    /// The `Age` and `Cache-Status` of recent fresh hits, shared by the hits that match them.
    let freshHitFields = FreshHitFields()

    init(inner: any Handler, options: CacheOptions, storage: CacheStorage, keyedHeaders: [HTTPField.Name] = [],
         directives: [HTTPField.Name] = [], backgroundWork: any BackgroundWork = DetachedWork()) {
        self.inner = inner
        self.options = options
        self.storage = storage
        self.clock = storage.clock
        self.keyedHeaders = keyedHeaders
        self.directives = directives
        self.backgroundWork = backgroundWork
    }

    /// A cache answers fresh hits by itself.
    public var answersImmediately: Bool { true }

    /// A hit held in memory at once; anything else (a miss, a lookup in the persistent tier,
    /// a write) as the rest of the work, which carries the key and what the lookup found.
    public func answerImmediately(_ request: ProxyRequest) -> ImmediateAnswer {
        // Its status is noted on the way back, after what is inside it: its entry keeps its place.
        if request.record.traces { request.record.takeCachePlace() }
        guard request.isRead else { return .later(Deferred { try await self.write(request) }) }
        // A body is no part of the key: a GET or HEAD that has one is not the cache's to answer.
        guard request.body.readableBytes == 0 else { return .later(Deferred { try await self.bypass(request) }) }
        // The usual program's GET has no field but the id the edge gave it: no credentials, no
        // range, no validators to look for (each a scan of its fields; callgrind).
        let plain = Self.asksNothing(request.headers)
        let key = CacheKey.make(request, keyedHeaders: keyedHeaders, plain: plain)
        let range = plain ? nil : Self.range(of: request)
        guard let selection = storage.memoryLookup(key, request: request.headers, range: range) else {
            return .later(Deferred {
                let selection = await self.storage.persistentLookup(key, request: request.headers, range: range)
                switch self.read(request, key: key, range: range, selection: selection, plain: plain) {
                case .answer(let response): return response
                case .later(let rest): return try await rest()
                }
            })
        }
        return read(request, key: key, range: range, selection: selection, plain: plain)
    }

    /// Whether the request has no field but `X-Request-Id` (the one the edge sets): then it
    /// has none of the fields a read looks for (credentials, a range, validators).
    static func asksNothing(_ fields: HTTPFields) -> Bool {
        fields.allSatisfy { $0.name == .xRequestID }
    }

    // MARK: Reads

    /// What the lookup of `key` found makes of a read: a fresh hit or a stale one served
    /// while it is refreshed, at once; else the upstream is asked.
    /// `plain`: the request has no field but its id (``asksNothing(_:)``).
    func read(_ request: ProxyRequest, key: String, range: RangeRequest?, selection: CacheStorage.Selection, plain: Bool = false) -> ImmediateAnswer {
        var reason = selection.missReason
        if let entry = selection.entry {
            let now = clock.now()
            let ttl = entry.ttl(at: now)
            if !entry.isComplete, !Self.ifRangeHolds(request.headers, entry) {
                // A stored part cannot answer a range whose If-Range fails: that needs the whole.
                reason = "partial"
            } else if entry.fromWrite, request.headers.contains(.ifNoneMatch) || request.headers.contains(.ifModifiedSince) {
                // The validators of a write's answer describe what was written, not what a GET
                // returns (RFC 9110 §9.3.4): a conditional read goes to the upstream.
                reason = "request"
            } else if entry.isFresh(at: now) {
                storage.metrics.count(.hit)
                let fields = freshHitFields.fields(age: Int.clamping(entry.age(at: now), to: .min ... .max), ttl: Int.clamping(ttl, to: .min ... .max))
                return .answer(hit(entry, request, range: range, age: fields.ageField, cacheStatus: fields.status, statusField: fields.statusField,
                                   summary: "hit", plain: plain))
            } else if !entry.noCache, !entry.mustRevalidate, entry.staleWhileRevalidate > 0, -ttl <= entry.staleWhileRevalidate {
                storage.metrics.count(.stale)
                refreshInBackground(request, key: key, entry: entry)
                return .answer(hit(entry, request, range: range, now: now,
                                   status: "hit; ttl=\(Int.clamping(ttl, to: .min ... .max)); detail=stale-while-revalidate"))
            } else {
                reason = "stale"
            }
        }
        let stale = reason == "partial" ? nil : selection.entry
        let why = reason
        return .later(Deferred { try await self.fetch(request, key: key, range: range, stale: stale, reason: why) })
    }

    /// Asks the upstream (conditionally when a stale copy has validators), with concurrent
    /// requests for the same key waiting for this one. A follower answers from what the
    /// leader stored only when its own selecting headers match that response's `Vary`;
    /// otherwise it looks again and waits for, or becomes, the leader of its own variant.
    func fetch(_ request: ProxyRequest, key: String, range: RangeRequest?, stale: CacheEntry?, reason: String) async throws -> ProxyResponse {
        // A request for a range that no complete response answers gets a part of its own.
        if request.method == .get, request.headers.contains(.range), stale?.isComplete != true {
            return try await forward(request, key: key, stale: stale, reason: reason).response
        }
        // A request with a directive for a decorator inside (a fault asked for) goes on alone:
        // others must not wait for what it asked for, or share its answer.
        if directives.contains(where: { request.headers.contains($0) }) {
            return try await forward(request, key: key, stale: stale, reason: reason).response
        }
        for _ in 0..<3 {
            let (flight, leader) = storage.join(key)
            if leader {
                do {
                    let (response, entry) = try await forward(request, key: key, stale: stale, reason: reason)
                    storage.finish(key, flight, entry.map { .shared($0) } ?? .notShared)
                    return response
                } catch let error as ProxyError {
                    storage.finish(key, flight, .failed(error))
                    throw error
                } catch {
                    storage.finish(key, flight, .notShared)
                    throw error
                }
            }
            switch await flight.wait() {
            case .shared(let entry) where entry.isComplete && entry.matches(request.headers):
                storage.metrics.count(.collapsed)
                return hit(entry, request, range: range, now: clock.now(), status: "fwd=\(reason); collapsed")
            case .shared:
                // Stored for other selecting headers: this request's own may be stored by now.
                let now = clock.now()
                if let found = storage.memoryLookup(key, request: request.headers, range: range)?.entry, found.isComplete, found.isFresh(at: now) {
                    storage.metrics.count(.hit)
                    return hit(found, request, range: range, now: now, cacheStatus: Self.freshHitStatus(ttl: Int.clamping(found.ttl(at: now), to: .min ... .max)), summary: "hit")
                }
            case .notShared:
                return try await forward(request, key: key, stale: stale, reason: reason).response
            case .failed(let error):
                if let stale, let served = staleIfError(stale, request, status: error.status.code) { return served }
                throw failed(error, request, status: "fwd=\(reason); fwd-status=\(error.status.code); collapsed")
            }
        }
        return try await forward(request, key: key, stale: stale, reason: reason).response
    }

    /// One upstream exchange for a read, and what to store and answer.
    func forward(_ request: ProxyRequest, key: String, stale: CacheEntry?, reason: String) async throws -> (response: ProxyResponse, entry: CacheEntry?) {
        var upstreamRequest = request
        // HEAD is fetched as GET so that the answer can be stored; the edge drops the body.
        upstreamRequest.method = .get
        // The client's own validators are answered here, not forwarded: the cache needs a full response.
        Self.remove([.ifNoneMatch, .ifModifiedSince], from: &upstreamRequest.headers)
        // A range goes on when no complete response is stored (a part may then be stored);
        // revalidating a complete one, or for HEAD (which ignores ranges), it does not.
        let revalidates = stale?.isComplete == true
        if request.method != .get || revalidates { Self.remove([.range, .ifRange], from: &upstreamRequest.headers) }
        if let stale, revalidates {
            if let etag = stale.etag { upstreamRequest.headers[.ifNoneMatch] = etag }
            if let lastModified = stale.lastModified { upstreamRequest.headers[.ifModifiedSince] = lastModified }
        }
        let requestTime = clock.now()
        let response: ProxyResponse
        do {
            response = try await inner.handle(upstreamRequest)
        } catch let error as ProxyError {
            // Unreachable, timed out, or closed before answering: the upstream failed.
            if let stale, let served = staleIfError(stale, request, status: error.status.code) { return (served, nil) }
            throw failed(error, request, status: "fwd=\(reason); fwd-status=\(error.status.code)")
        }
        let responseTime = clock.now()

        if response.status == .notModified, let stale, revalidates {
            storage.metrics.count(.revalidated)
            let refreshed = freshened(stale, by: response, request, requestTime: requestTime, responseTime: responseTime)
            if let refreshed { storage.store(key, refreshed) }
            let served = hit(refreshed ?? stale, request, range: Self.range(of: request), now: responseTime, status: "fwd=stale; fwd-status=304")
            return (Self.withTiming(of: response, served), refreshed)
        }
        if response.status.code >= 500, let stale, let served = staleIfError(stale, request, status: response.status.code) {
            // The error's own body is not passed on: one still streaming is dropped (its connection closed).
            response.discardBody()
            return (served, nil)
        }
        storage.metrics.count(.miss)
        if let stream = response.stream {
            // The answer passes as it comes; a copy is kept while it fits (stored at its end).
            let stores = storeWhilePassing(stream, response, request, key: key, requestTime: requestTime, responseTime: responseTime)
            return (finish(response, request, status: "fwd=\(reason); fwd-status=\(response.status.code)" + (stores ? "; detail=stored-at-end" : "")), nil)
        }
        if let entry = CachePolicy.entry(status: response.status, headers: response.headers, body: response.body, request: request,
                                         requestTime: requestTime, responseTime: responseTime, options: options) {
            storage.store(key, entry)
            let status = "fwd=\(reason); fwd-status=\(response.status.code); stored"
            // A part is passed on as it came; a whole response answers as a hit would (a range of it, a 304).
            guard entry.isComplete else { return (finish(response, request, status: status), nil) }
            let served = hit(entry, request, range: Self.range(of: request), now: responseTime, status: status)
            return (Self.withTiming(of: response, served), entry)
        }
        return (finish(response, request, status: "fwd=\(reason); fwd-status=\(response.status.code)"), nil)
    }

    /// Keeps a copy of a streamed answer's body as it passes, up to `max_entry_size`, and
    /// stores it once the body has ended whole; the copy is dropped once it is over (the
    /// answer itself is neither delayed nor cut). False when it cannot be stored at all.
    func storeWhilePassing(_ stream: BodyStream, _ response: ProxyResponse, _ request: ProxyRequest, key: String,
                           requestTime: Date, responseTime: Date) -> Bool {
        let limit = options.maxEntrySize
        if let length = stream.expectedLength, length > limit { return false }
        // Whether the answer may be stored at all, judged on its head.
        guard response.status.code == 200,
              CachePolicy.entry(status: response.status, headers: response.headers, body: ByteBuffer(), request: request,
                                requestTime: requestTime, responseTime: responseTime, options: options) != nil else { return false }
        let copy = BodyStream.Copy(limit: limit, budget: buffers)
        let storage = storage, options = options
        stream.tap { event in
            switch event {
            case .part(let part):
                copy.append(part)
            case .end:
                guard let body = copy.take(),
                      let entry = CachePolicy.entry(status: response.status, headers: response.headers, body: body, request: request,
                                                    requestTime: requestTime, responseTime: responseTime, options: options) else { return }
                storage.store(key, entry)
            case .failed:
                _ = copy.take()
            }
        }
        return true
    }

    /// `served` (made from what was stored) with the upstream's own `Server-Timing` of the
    /// exchange that answered it: that field is never stored (a hit later is no exchange).
    static func withTiming(of response: ProxyResponse, _ served: ProxyResponse) -> ProxyResponse {
        guard response.headers.contains(.serverTiming) else { return served }
        var served = served
        for value in response.headers[values: .serverTiming] { served.headers.append(HTTPField(name: .serverTiming, value: value)) }
        return served
    }

    /// The stored response updated by a 304 (RFC 9111 §4.3.4): its fields replaced by those
    /// the 304 carries (but `Content-Length` and `Content-Type`), and a new freshness
    /// period; nil when the updated response may not be stored.
    func freshened(_ stale: CacheEntry, by response: ProxyResponse, _ request: ProxyRequest, requestTime: Date, responseTime: Date) -> CacheEntry? {
        var fields = stale.headers.fields
        let updates = response.headers.fields
        for field in updates where field.name != .contentLength && field.name != .contentType {
            fields[field.name] = updates[values: field.name].joined(separator: ", ")
        }
        var readRequest = request
        readRequest.method = .get
        return CachePolicy.entry(status: stale.status, headers: ProxyHeaders(fields), body: stale.body, request: readRequest,
                                 requestTime: requestTime, responseTime: responseTime, options: options)
    }

    func refreshInBackground(_ request: ProxyRequest, key: String, entry: CacheEntry) {
        let decorator = self
        let (flight, leader) = storage.join(key)
        guard leader else { return }
        // The refresh is a request of its own, in the trace of the one that started it (with
        // `telemetry`): an internal span under that request's server span, its upstream request
        // a client span below, with a traceparent of its own, never the caller's as it came.
        let trace = request.record.trace.map { BackgroundTrace("cache refresh", continuing: $0, to: spans) }
        var refresh = request
        refresh.record = trace?.record ?? RequestRecord()
        let request = refresh
        // The caller already has its (stale) answer; this refresh belongs to nobody, so it
        // cannot be a child task of the request: the chain's background work, which its
        // generation's drain waits for.
        backgroundWork.start {
            do {
                let (answer, stored) = try await decorator.forward(request, key: key, stale: entry, reason: "stale")
                // Nobody reads this answer: a body that streams is read here, so that its copy
                // is stored at its end (over max_entry_size it is cut, and its connection closed).
                if let stream = answer.stream { _ = try? await stream.collect(upTo: decorator.options.maxEntrySize, budget: decorator.buffers) }
                decorator.storage.finish(key, flight, stored.map { .shared($0) } ?? .notShared)
                trace?.end()
            } catch let error as ProxyError {
                decorator.storage.finish(key, flight, .failed(error))
                trace?.end(error: error.code.rawValue)
            } catch {
                decorator.storage.finish(key, flight, .notShared)
                trace?.end(error: "internal")
            }
        }
    }

    /// The stored response for a stale-if-error case, if allowed: never for a response that
    /// must be revalidated before use (`no-cache`, `must-revalidate`, `proxy-revalidate`,
    /// `s-maxage`, RFC 9111 §4.2.4).
    func staleIfError(_ entry: CacheEntry, _ request: ProxyRequest, status: Int) -> ProxyResponse? {
        let now = clock.now()
        guard !entry.mustRevalidate, !entry.noCache, entry.staleIfError > 0, -entry.ttl(at: now) <= entry.staleIfError else { return nil }
        storage.metrics.count(.stale)
        return hit(entry, request, range: Self.range(of: request), now: now,
                   status: "fwd=stale; fwd-status=\(status); ttl=\(Int.clamping(entry.ttl(at: now), to: .min ... .max)); detail=stale-if-error")
    }

    /// A response from a stored entry: `Age`, `Cache-Status`, 304 when the client's
    /// validators match, and the range asked for (RFC 9110 §14) when the entry holds it.
    func hit(_ entry: CacheEntry, _ request: ProxyRequest, range: RangeRequest?, now: Date, status: String) -> ProxyResponse {
        hit(entry, request, range: range, now: now, cacheStatus: "veneer; " + status)
    }

    /// `veneer; hit; ttl=N`, the `Cache-Status` of a fresh hit, in one pass (an interpolation
    /// then a concatenation cost a hit some 900 instructions).
    static func freshHitStatus(ttl: Int) -> String {
        let prefix: StaticString = "veneer; hit; ttl="
        return String(unsafeUninitializedCapacity: prefix.utf8CodeUnitCount + 20) { bytes in
            var offset = prefix.utf8CodeUnitCount
            UnsafeMutableRawBufferPointer(bytes).copyMemory(from: UnsafeRawBufferPointer(start: prefix.utf8Start, count: offset))
            if ttl < 0 {
                bytes[offset] = UInt8(ascii: "-")
                offset += 1
            }
            // The magnitude as a UInt: Int.min has none of its own.
            let magnitude = ttl.magnitude
            var scale: UInt = 1
            while magnitude / scale >= 10 { scale *= 10 }
            while scale > 0 {
                bytes[offset] = UInt8(truncatingIfNeeded: (magnitude / scale) % 10) + UInt8(ascii: "0")
                offset += 1
                scale /= 10
            }
            return offset
        }
    }

    /// ``hit(_:_:range:now:status:)`` with the whole `Cache-Status` given (and its summary, if known: ``RequestRecord/noteCacheStatus(_:summary:)``).
    func hit(_ entry: CacheEntry, _ request: ProxyRequest, range: RangeRequest?, now: Date, cacheStatus: String, summary: String? = nil) -> ProxyResponse {
        hit(entry, request, range: range, age: HTTPField(name: .age, value: String(Int.clamping(entry.age(at: now), to: .min ... .max))),
            cacheStatus: cacheStatus, statusField: HTTPField(name: .cacheStatus, value: cacheStatus), summary: summary, plain: false)
    }

    /// ``hit(_:_:range:now:cacheStatus:summary:)`` with its `Age` field and its `Cache-Status`
    /// (as text and as a field) made already (a fresh hit's: ``FreshHitFields``), taken rather
    /// than copied; `plain`: the request has no validators to match (``asksNothing(_:)``).
    func hit(_ entry: CacheEntry, _ request: ProxyRequest, range: RangeRequest?, age: consuming HTTPField, cacheStatus: String,
             statusField: consuming HTTPField, summary: String?, plain: Bool) -> ProxyResponse {
        // Stored headers never hold Age or Cache-Status (CachePolicy drops them): appended
        // after the stored fields, which stay shared with the entry.
        var response = ProxyResponse(status: entry.status, headers: entry.headers, body: entry.body)
        response.headers.append(age)
        response.headers.append(statusField)
        request.record.noteCacheStatus(cacheStatus, summary: summary)
        if !plain, CachePolicy.clientValidatorsMatch(request.headers, entry) {
            let headers = response.headers
            var notModified = ProxyHeaders()
            for name in [HTTPField.Name.eTag, .lastModified, .cacheControl, .expires, .vary, .age, .cacheStatus, .date] {
                if let value = headers[name] { notModified[name] = value }
            }
            return ProxyResponse(status: .notModified, headers: notModified)
        }
        if let range, entry.code == 200 || entry.part != nil, Self.ifRangeHolds(request.headers, entry) {
            let complete = entry.part?.complete ?? entry.body.readableBytes
            let offset = entry.part?.first ?? 0
            // An unsatisfiable range is ignored: the whole response answers (RFC 9110 §14.2 allows it).
            if let bytes = range.resolve(length: complete), bytes.lowerBound >= offset, bytes.upperBound < offset + entry.body.readableBytes,
               let slice = entry.body.getSlice(at: entry.body.readerIndex + bytes.lowerBound - offset, length: bytes.count) {
                response.status = .partialContent
                response.body = slice
                let contentRange = "bytes \(bytes.lowerBound)-\(bytes.upperBound)/\(complete)"
                // Replaces any the stored 200 came with: this answer holds these bytes.
                if response.headers.contains(.contentRange) {
                    response.headers[.contentRange] = contentRange
                } else {
                    response.headers.append(HTTPField(name: .contentRange, value: contentRange))
                }
            }
        }
        return response
    }

    func finish(_ response: ProxyResponse, _ request: ProxyRequest, status: String) -> ProxyResponse {
        var response = response
        // Veneer's own targeted field is for Veneer alone.
        if response.headers.contains(.veneerCacheControl) { response.headers[.veneerCacheControl] = nil }
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

    /// Veneer's own error from inside the cache (a 502 or 504 of the origin, a fault's drop,
    /// replay's 404, auth_refresh's 401): passed on with a `Cache-Status` that says what the
    /// cache did, as an answer of the upstream would be (RFC 9211: every answer the cache
    /// handled says so). No `Age`: nothing stored answered it.
    func failed(_ error: ProxyError, _ request: ProxyRequest, status: String) -> ProxyError {
        var error = error
        let cacheStatus = "veneer; " + status
        error.headers[.cacheStatus] = cacheStatus
        request.record.noteCacheStatus(cacheStatus)
        return error
    }

    /// A read the cache does not answer (it has a body): forwarded as it is, nothing stored.
    func bypass(_ request: ProxyRequest) async throws -> ProxyResponse {
        storage.metrics.count(.bypass)
        let status = "fwd=bypass; detail=request-body"
        let response: ProxyResponse
        do {
            response = try await inner.handle(request)
        } catch let error as ProxyError {
            throw failed(error, request, status: status)
        }
        return finish(response, request, status: status)
    }

    /// The one range a GET asks for; nil for none, for several (answered whole), and for HEAD.
    static func range(of request: ProxyRequest) -> RangeRequest? {
        guard request.method == .get, let value = request.headers.ifPresent(.range), let ranges = RangeRequest.parse(value), ranges.count == 1 else {
            return nil
        }
        return ranges[0]
    }

    /// Whether `If-Range` lets the range apply to `entry` (RFC 9110 §13.1.5): absent, or an
    /// entity tag equal to the entry's strong one, or a date equal to its `Last-Modified`
    /// when that is strong (at least a second before its `Date`).
    static func ifRangeHolds(_ request: HTTPFields, _ entry: CacheEntry) -> Bool {
        guard let condition = request[.ifRange]?.trimmingSpaces else { return true }
        if condition.hasPrefix("\"") || condition.hasPrefix("W/") {
            return entry.strongETag.map { $0 == condition } ?? false
        }
        guard let date = HTTPDate.parse(String(condition)), let modifiedText = entry.lastModified,
              let modified = HTTPDate.parse(modifiedText), modified == date else { return false }
        let sent = entry.headers[values: .date].first.flatMap { HTTPDate.parse($0) } ?? entry.responseTime
        return sent.timeIntervalSince(modified) >= 1
    }

    static func remove(_ names: [HTTPField.Name], from fields: inout HTTPFields) {
        for name in names where fields.contains(name) { fields[name] = nil }
    }

    // MARK: Writes

    /// A write: passed on; unless the upstream answers with an error of its own, the item, its
    /// lists and what the answer's `Location` and `Content-Location` name are invalidated
    /// (RFC 9111 §4.4), and the answer is stored as the item when it shows that it is one.
    func write(_ request: ProxyRequest) async throws -> ProxyResponse {
        let resource = request.route.resource
        var prefixes = [CacheKey.listPrefix(resource)]
        if let id = request.route.id { prefixes.append(CacheKey.itemPrefix(resource, id)) }
        let response: ProxyResponse
        do {
            response = try await inner.handle(request)
        } catch {
            // Veneer's own failure (502, 504): the upstream may have applied the change before it.
            await storage.invalidate(prefixes: prefixes)
            guard let error = error as? ProxyError else { throw error }
            throw failed(error, request, status: "fwd=request")
        }
        storage.metrics.count(.bypass)
        // The upstream refused the change: nothing changed.
        guard response.status.code < 400 else { return finish(response, request, status: "fwd=request") }
        for name in [HTTPField.Name.location, .contentLocation] {
            guard let value = response.headers[values: name].first, let named = Self.namedRoute(value, resource) else { continue }
            prefixes.append(named.id.map { CacheKey.itemPrefix(resource, $0) } ?? CacheKey.listPrefix(resource))
        }
        guard let writtenID = Self.evidencedID(request, response) else {
            await storage.invalidate(prefixes: prefixes)
            return finish(response, request, status: "fwd=request")
        }
        var itemRequest = request
        itemRequest.method = .get
        itemRequest.route = .item(resource, writtenID)
        itemRequest.query = nil
        itemRequest.body = ByteBuffer()
        let itemKey = CacheKey.make(itemRequest, keyedHeaders: keyedHeaders)
        // A create never replaces what is stored for the id it names: that is only dropped.
        let keepOut = request.method == .post ? await storage.holds(itemKey) : false
        await storage.invalidate(prefixes: prefixes)
        let now = clock.now()
        if !keepOut, let entry = CachePolicy.entry(status: .ok, headers: response.headers, body: response.body, request: itemRequest,
                                                  requestTime: now, responseTime: now, options: options, writeThrough: true) {
            storage.store(itemKey, entry)
            return finish(response, request, status: "fwd=request; stored")
        }
        return finish(response, request, status: "fwd=request")
    }

    /// The id of the item a write's answer is the representation of, when it shows it:
    /// a 201 to a create whose `Location` or `Content-Location` names the item and whose body's
    /// `id` is the same; a 2xx to a PUT or PATCH with `Content-Location` naming the item, or
    /// a JSON object whose `id` is the item's.
    static func evidencedID(_ request: ProxyRequest, _ response: ProxyResponse) -> String? {
        let resource = request.route.resource
        let code = response.status.code
        switch request.method {
        case .post where request.route.id == nil:
            guard code == 201, let id = bodyID(response.body, resource) else { return nil }
            let named = [HTTPField.Name.location, .contentLocation].compactMap { response.headers[values: $0].first }
                .compactMap { namedRoute($0, resource) }
            return named.contains { $0.id == id && !$0.hasQuery } ? id : nil
        case .put, .patch:
            guard let id = request.route.id, (200..<300).contains(code), code != 204 else { return nil }
            if let location = response.headers[values: .contentLocation].first, let named = namedRoute(location, resource),
               named.id == id, !named.hasQuery {
                return id
            }
            return bodyID(response.body, resource) == id ? id : nil
        default:
            return nil
        }
    }

    /// The canonical `id` of a JSON object body, if it has one.
    static func bodyID(_ body: ByteBuffer, _ resource: Resource) -> String? {
        guard let object = try? JSONValue.parse(body), let id = object["id"] else { return nil }
        switch id {
        case .number(let number): return resource.canonicalID(Substring(number))
        case .string(let string): return resource.canonicalID(Substring(string))
        default: return nil
        }
    }

    /// What a `Location` or `Content-Location` value names of `resource`: a path, or an
    /// http(s) URL, whose path ends in `/NAME` (the list, id nil) or `/NAME/ID` (an item).
    /// Veneer's cache holds one API, whose paths may sit under a prefix it does not know.
    static func namedRoute(_ value: String, _ resource: Resource) -> (id: String?, hasQuery: Bool)? {
        var reference = Substring(value.trimmingSpaces)
        if let hash = reference.firstIndex(of: "#") { reference = reference[..<hash] }
        var hasQuery = false
        if let question = reference.firstIndex(of: "?") {
            hasQuery = true
            reference = reference[..<question]
        }
        let lowered = reference.prefix(8).lowercased()
        if lowered.hasPrefix("http://") || lowered.hasPrefix("https://") || reference.hasPrefix("//") {
            let afterScheme = reference.hasPrefix("//") ? reference.dropFirst(2) : reference[reference.range(of: "://")!.upperBound...]
            guard let slash = afterScheme.firstIndex(of: "/") else { return nil }
            reference = afterScheme[slash...]
        }
        guard reference.hasPrefix("/") else { return nil }
        let segments = reference.split(separator: "/", omittingEmptySubsequences: false)
        if segments.last == Substring(resource.name) { return (nil, hasQuery) }
        guard segments.count >= 3, segments[segments.count - 2] == Substring(resource.name),
              let id = resource.canonicalID(segments[segments.count - 1]) else { return nil }
        return (id, hasQuery)
    }
}

