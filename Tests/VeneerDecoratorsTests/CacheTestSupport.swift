import Foundation
import HTTPTypes
import NIOCore
import Prometheus
import Testing
import VeneerCore
import VeneerDecorators
import VeneerOrigins
import VeneerTestSupport

/// A cache in front of a real upstream origin, with a manual clock.
struct CacheRig {
    let cache: CacheDecorator
    let upstream: TestUpstream
    let clock: ManualClock
    let registry: PrometheusCollectorRegistry

    func get(_ path: String, headers: HTTPFields = [:]) async throws -> ProxyResponse {
        try await cache.handle(Self.request(.get, path, headers: headers))
    }

    func send(_ method: HTTPRequest.Method, _ path: String, _ body: String = "", headers: HTTPFields = [:]) async throws -> ProxyResponse {
        try await cache.handle(Self.request(method, path, body: body, headers: headers))
    }

    static func request(_ method: HTTPRequest.Method, _ target: String, body: String = "", headers: HTTPFields = [:]) -> ProxyRequest {
        let parts = target.split(separator: "?", maxSplits: 1)
        let segments = parts[0].split(separator: "/")
        let resource = Resource.posts
        let route: ResourceRoute = segments.count > 1 ? .item(resource, String(segments[1])) : .list(resource)
        return ProxyRequest(method: method, route: route, query: parts.count > 1 ? String(parts[1]) : nil, headers: headers,
                            body: ByteBuffer(string: body))
    }
}

/// Runs `body` with a cache in front of an upstream answering with `reply`; the cache's clock
/// starts at `start` (the instant a test's `Date` headers count from: starting the upstream on
/// a loaded machine can take seconds, which must not age what it answers).
func withCache<T>(
    _ options: CacheOptions = CacheOptions(), store: (any KeyValueStore)? = nil, start: Date = Date(),
    reply: @escaping @Sendable (RecordedRequest) async throws -> UpstreamReply,
    _ body: (CacheRig) async throws -> T
) async throws -> T {
    let provider = StandardTransportProvider()
    do {
        let result = try await withTestUpstream(reply) { (upstream: TestUpstream) async throws -> T in
            let clock = ManualClock(start: start)
            let registry = PrometheusCollectorRegistry()
            let originOptions = UpstreamOriginOptions(endpoint: Endpoint(url: upstream.url)!, timeout: .seconds(30))
            let origin = UpstreamOrigin(options: originOptions, transport: provider.transport(originOptions.transport))
            let cache = CacheDecorator.make(inner: origin, options: options, clock: clock, store: store,
                                            metrics: PrometheusMetricsFactory(registry: registry))
            return try await body(CacheRig(cache: cache, upstream: upstream, clock: clock, registry: registry))
        }
        await provider.shutdown()
        return result
    } catch {
        await provider.shutdown()
        throw error
    }
}

extension CacheRig {
    /// Expects `path` (already stored) to be answered from the cache for `seconds - 2` more
    /// seconds and to need the upstream 4 seconds later.
    func expectFresh(_ path: String, for seconds: Int, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        clock.advance(by: .seconds(seconds - 2))
        #expect(try await get(path).cacheStatus.hasPrefix("veneer; hit"), "fresh for \(seconds)s", sourceLocation: sourceLocation)
        clock.advance(by: .seconds(4))
        #expect(try await get(path).cacheStatus.contains("fwd=stale"), "stale after \(seconds)s", sourceLocation: sourceLocation)
    }
}

/// A post as JSON with freshness headers.
func post(_ id: Int, title: String = "t", headers: [(String, String)] = []) -> UpstreamReply {
    .json(#"{"id":\#(id),"title":"\#(title)","body":"b"}"#, headers: headers)
}

extension ProxyResponse {
    var text: String { String(buffer: body) }
    var cacheStatus: String { headers[.cacheStatus] ?? "" }
}

/// A cache in front of an upstream that scripts every answer at the byte level (to close a
/// connection before answering, say), with a manual clock.
struct ScriptedCacheRig {
    let cache: CacheDecorator
    let upstream: ScriptedUpstream
    let clock: ManualClock

    func get(_ path: String, headers: HTTPFields = [:]) async throws -> ProxyResponse {
        try await cache.handle(CacheRig.request(.get, path, headers: headers))
    }

    func send(_ method: HTTPRequest.Method, _ path: String, _ body: String = "") async throws -> ProxyResponse {
        try await cache.handle(CacheRig.request(method, path, body: body))
    }
}

/// Runs `body` with a cache in front of a ``ScriptedUpstream`` answering with `script`.
func withScriptedCache<T>(
    _ options: CacheOptions = CacheOptions(),
    script: @escaping @Sendable (ScriptedUpstream.Received) -> ScriptedUpstream.Action,
    _ body: (ScriptedCacheRig) async throws -> T
) async throws -> T {
    let provider = StandardTransportProvider()
    let upstream = try await ScriptedUpstream.start(script)
    do {
        let originOptions = UpstreamOriginOptions(endpoint: Endpoint(url: upstream.url)!, timeout: .seconds(30))
        let origin = UpstreamOrigin(options: originOptions, transport: provider.transport(originOptions.transport))
        let clock = ManualClock(start: Date())
        let cache = CacheDecorator.make(inner: origin, options: options, clock: clock, metrics: PrometheusMetricsFactory(registry: PrometheusCollectorRegistry()))
        let result = try await body(ScriptedCacheRig(cache: cache, upstream: upstream, clock: clock))
        await upstream.stop()
        await provider.shutdown()
        return result
    } catch {
        await upstream.stop()
        await provider.shutdown()
        throw error
    }
}

/// The answer of an upstream that serves `body` and supports single byte ranges (RFC 9110
/// §14): a 206 with `Content-Range` for `Range: bytes=a-b`, `a-` or `-n`, else the whole.
func ranged(_ request: RecordedRequest, body: String, etag: String = "\"r1\"", headers: [(String, String)] = [("Cache-Control", "max-age=600")]) -> UpstreamReply {
    let bytes = Array(body.utf8)
    let fields = [("Content-Type", "text/plain"), ("ETag", etag)] + headers
    guard let range = request.header("range"), range.hasPrefix("bytes="), !range.contains(",") else {
        return UpstreamReply(status: 200, headers: fields, body: body)
    }
    let spec = range.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false)
    guard spec.count == 2 else { return UpstreamReply(status: 200, headers: fields, body: body) }
    var first = Int(spec[0]) ?? 0
    var last = Int(spec[1]) ?? bytes.count - 1
    if spec[0].isEmpty {
        first = max(0, bytes.count - (Int(spec[1]) ?? 0))
        last = bytes.count - 1
    }
    last = min(last, bytes.count - 1)
    return UpstreamReply(status: 206, headers: fields + [("Content-Range", "bytes \(first)-\(last)/\(bytes.count)")],
                         body: String(decoding: bytes[first...last], as: UTF8.self))
}
