import HTTPTypes
import NIOCore
import Testing
@testable import VeneerDecorators

/// `Cache-Control` as the cache reads it, and what it keeps of a body.
@Suite("cache: Cache-Control directives and stored bodies")
struct CacheControlTests {
    @Test("directives split at commas outside quotes, names lower-cased, values unquoted")
    func split() {
        let pairs = CacheControl.split(#"Public, MAX-AGE = 60 , no-cache="Set-Cookie, X-A", , s-maxage=5"#)
        #expect(pairs.map(\.0) == ["public", "max-age", "no-cache", "s-maxage"])
        #expect(pairs.map(\.1) == [nil, "60", "Set-Cookie, X-A", "5"])
        #expect(CacheControl.split(#"private="unbalanced, max-age=3"#).isEmpty)
    }

    @Test("every Cache-Control field counts; a bad max-age means already stale, a bad stale-if-error nothing")
    func fields() {
        var fields = HTTPFields()
        fields.append(HTTPField(name: .cacheControl, value: "public, max-age=abc"))
        fields.append(HTTPField(name: .cacheControl, value: "stale-if-error=x, s-maxage=30, must-revalidate"))
        let control = CacheControl(fields)
        #expect(control.isPublic && control.mustRevalidate)
        #expect(control.maxAge == 0 && control.sharedMaxAge == 30 && control.staleIfError == nil)
    }

    @Test("a stored body does not keep the read buffer it was sliced from, nor room it does not use")
    func compactBody() {
        var read = ByteBufferAllocator().buffer(capacity: 8192)
        read.writeString("HTTP/1.1 200 OK\r\n\r\n" + String(repeating: "b", count: 200))
        let body = read.getSlice(at: 19, length: 200)!
        #expect(body.storageCapacity >= 8192)
        let stored = CachePolicy.compact(body)
        #expect(stored == body && stored.storageCapacity == 200, "exactly its own size, not a power of two")
        #expect(CachePolicy.compact(stored).storageCapacity == stored.storageCapacity)
    }
}
