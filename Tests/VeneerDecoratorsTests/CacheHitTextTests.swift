import HTTPTypes
import NIOCore
import Testing
import VeneerCore
@testable import VeneerDecorators

/// The text a cache hit builds per request, written byte by byte for speed: the same text as
/// the plain string building it replaced.
@Suite("cache: keys and Cache-Status of hits")
struct CacheHitTextTests {
    /// The key as it was built before (piece by piece), for comparison.
    static func plainKey(_ request: ProxyRequest, keyedHeaders: [HTTPField.Name]) -> String {
        var extra = ""
        for name in keyedHeaders {
            let value = request.headers[name] ?? ""
            extra += " \(name.canonicalName)=\(value.utf8.count):\(value)"
        }
        let id = request.route.id.map { "I/" + request.route.resource.name + "/" + $0 } ?? "L/" + request.route.resource.name
        return id + " " + CacheKey.sortedQuery(request.query) + extra + " " + CacheKey.partition(request.headers)
    }

    @Test("keys of items and lists, with queries, keyed headers and credentials, are the text built piece by piece")
    func keys() {
        let long = Resource(name: "a-collection-with-a-long-name", kind: .posts)
        let requests: [(ProxyRequest, [HTTPField.Name])] = [
            (CacheRig.request(.get, "/posts/13"), []),
            (CacheRig.request(.get, "/posts"), []),
            (CacheRig.request(.get, "/posts?b=2&a=1"), []),
            (CacheRig.request(.get, "/posts/7", headers: [.authorization: "Bearer x"]), []),
            (CacheRig.request(.get, "/posts/7", headers: [.cookie: "a=1", .acceptLanguage: "fr, é"]), [.acceptLanguage]),
            (CacheRig.request(.get, "/posts/7?q=ü", headers: [.accept: "text/plain"]), [.accept, .acceptLanguage]),
            (ProxyRequest(method: .get, route: .item(long, "123456789012345678901234567890")), []),
        ]
        for (request, keyed) in requests {
            #expect(CacheKey.make(request, keyedHeaders: keyed) == Self.plainKey(request, keyedHeaders: keyed))
        }
        #expect(CacheKey.make(CacheRig.request(.get, "/posts/13")) == "I/posts/13  ")
        #expect(CacheKey.make(CacheRig.request(.get, "/posts/13")).utf8.count == 12)
    }

    @Test("a fresh hit's Cache-Status is veneer; hit; ttl= and its ttl in seconds, whatever its size or sign")
    func freshHitStatus() {
        for ttl in [0, 1, 9, 10, 53, 3600, 99_999, -1, -3600, Int.max, Int.min] {
            #expect(CacheDecorator.freshHitStatus(ttl: ttl) == "veneer; hit; ttl=\(ttl)")
        }
    }
}
