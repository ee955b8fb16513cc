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

    @Test("fresh hits of the same age and ttl share one Age and Cache-Status; any other age or ttl, even in the same slot, gets its own")
    func freshHitFields() {
        let memo = FreshHitFields()
        func expectFields(age: Int, ttl: Int, sourceLocation: SourceLocation = #_sourceLocation) {
            let made = memo.fields(age: age, ttl: ttl)
            #expect(made.age == age && made.ttl == ttl, sourceLocation: sourceLocation)
            #expect(made.ageField == HTTPField(name: .age, value: "\(age)"), sourceLocation: sourceLocation)
            #expect(made.status == "veneer; hit; ttl=\(ttl)" && made.statusField == HTTPField(name: .cacheStatus, value: made.status),
                    sourceLocation: sourceLocation)
        }
        // 5 and 9 share a slot (two low bits), as 5 with ttl 10 and 11 do.
        for (age, ttl) in [(5, 10), (5, 10), (9, 10), (5, 10), (5, 11), (6, 10), (5, 11), (0, 0), (4, 0), (3600, -2), (Int.max, Int.min)] {
            expectFields(age: age, ttl: ttl)
        }
    }

    @Test("a request asks nothing of a read (no credentials, range or validators to look for) only when its one field is its X-Request-Id, or it has none")
    func asksNothing() {
        let id = HTTPField(name: .xRequestID, value: "abc")
        #expect(CacheDecorator.asksNothing([:]))
        #expect(CacheDecorator.asksNothing(HTTPFields([id])))
        #expect(CacheDecorator.asksNothing(HTTPFields([HTTPField(name: HTTPField.Name("x-request-id")!, value: "abc")])))
        for other in [HTTPField.Name.range, .ifNoneMatch, .ifModifiedSince, .authorization, .cookie, .accept] {
            #expect(!CacheDecorator.asksNothing(HTTPFields([id, HTTPField(name: other, value: "x")])), "\(other)")
            #expect(!CacheDecorator.asksNothing(HTTPFields([HTTPField(name: other, value: "x")])), "\(other)")
        }
        // Keys made with and without the shortcut agree whenever it applies.
        let request = CacheRig.request(.get, "/posts/13", headers: [.xRequestID: "abc"])
        #expect(CacheKey.make(request, plain: true) == CacheKey.make(request))
    }
}
