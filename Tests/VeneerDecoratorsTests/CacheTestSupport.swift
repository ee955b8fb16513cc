import Foundation
import HTTPTypes
import NIOCore
import Prometheus
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

/// Runs `body` with a cache in front of an upstream answering with `reply`.
func withCache<T>(
    _ options: CacheOptions = CacheOptions(), store: (any KeyValueStore)? = nil,
    reply: @escaping @Sendable (RecordedRequest) async throws -> UpstreamReply,
    _ body: (CacheRig) async throws -> T
) async throws -> T {
    let provider = StandardTransportProvider()
    do {
        let result = try await withTestUpstream(reply) { (upstream: TestUpstream) async throws -> T in
            let clock = ManualClock(start: Date())
            let registry = PrometheusCollectorRegistry()
            let originOptions = UpstreamOriginOptions(endpoint: Endpoint(url: upstream.url)!, timeout: .seconds(5))
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

/// A post as JSON with freshness headers.
func post(_ id: Int, title: String = "t", headers: [(String, String)] = []) -> UpstreamReply {
    .json(#"{"id":\#(id),"title":"\#(title)","body":"b"}"#, headers: headers)
}

extension ProxyResponse {
    var text: String { String(buffer: body) }
    var cacheStatus: String { headers[.cacheStatus] ?? "" }
}
