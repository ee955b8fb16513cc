import HTTPTypes
import Testing
import VeneerCore

/// ProxyHeaders reads and changes like one HTTPFields, whichever way its fields are held.
@Suite("Response headers")
struct ProxyHeadersTests {
    static func fields(_ pairs: [(String, String)]) -> HTTPFields {
        var fields = HTTPFields()
        for (name, value) in pairs { fields.append(HTTPField(name: HTTPField.Name(name)!, value: value)) }
        return fields
    }

    static let names = ["etag", "ETag", "x-a", "cache-status", "age", "set-cookie", "cookie", "date", "x-none", "content-length"]
        .map { HTTPField.Name($0)! }

    /// Every reading of `headers` is what `expected` says.
    static func expectAgrees(_ headers: ProxyHeaders, _ expected: HTTPFields, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(headers.fields == expected, sourceLocation: sourceLocation)
        #expect(Array(headers) == Array(expected), "iteration", sourceLocation: sourceLocation)
        #expect(headers.count == expected.count && headers.isEmpty == expected.isEmpty, sourceLocation: sourceLocation)
        for name in names {
            #expect(headers[name] == expected[name], "\(name)", sourceLocation: sourceLocation)
            #expect(headers[values: name] == expected[values: name], "\(name)", sourceLocation: sourceLocation)
            #expect(headers.contains(name) == expected.contains(name), "\(name)", sourceLocation: sourceLocation)
        }
    }

    static let stored = fields([("ETag", "\"1\""), ("X-A", "s1"), ("Set-Cookie", "a=1"), ("Date", "d"), ("x-a", "s2")])

    @Test("shared fields with appended ones read as one list, also for names found in both parts", arguments: [false, true])
    func appended(shared: Bool) {
        var headers = shared ? ProxyHeaders(shared: Self.stored) : ProxyHeaders(Self.stored)
        var expected = Self.stored
        Self.expectAgrees(headers, expected)
        for (name, value) in [("Age", "3"), ("Cache-Status", "veneer; hit"), ("X-A", "a1"), ("Set-Cookie", "b=2"), ("Cookie", "c=1"), ("cookie", "d=2")] {
            let field = HTTPField(name: HTTPField.Name(name)!, value: value)
            headers.append(field)
            expected.append(field)
            Self.expectAgrees(headers, expected)
        }
        #expect(headers[HTTPField.Name("x-a")!] == "s1, s2, a1" && headers[.cookie] == "c=1; d=2")
        if shared, case .shared(_, let appended) = headers.wire {
            #expect(appended.count == 6, "appending keeps the shared fields shared")
        } else if shared {
            Issue.record("appending made the shared fields the response's own")
        }
    }

    @Test("setting and removing a name found in the shared and the appended part changes both, and nothing else", arguments: [false, true])
    func changes(shared: Bool) {
        let original = shared ? ProxyHeaders(shared: Self.stored) : ProxyHeaders(Self.stored)
        var headers = original
        var expected = Self.stored
        let xa = HTTPField.Name("X-A")!
        headers.append(HTTPField(name: xa, value: "a1"))
        expected.append(HTTPField(name: xa, value: "a1"))
        headers[xa] = "one"
        expected[xa] = "one"
        Self.expectAgrees(headers, expected)
        headers.append(HTTPField(name: .age, value: "1"))
        expected.append(HTTPField(name: .age, value: "1"))
        headers[values: .setCookie] = ["x=1", "y=2"]
        expected[values: .setCookie] = ["x=1", "y=2"]
        Self.expectAgrees(headers, expected)
        headers[xa] = nil
        expected[xa] = nil
        headers[.age] = nil
        expected[.age] = nil
        Self.expectAgrees(headers, expected)
        #expect(!headers.contains(xa) && headers[values: xa].isEmpty)
        // The copy it was made from, and the storage it shared, did not change.
        Self.expectAgrees(original, Self.stored)
    }

    @Test("copies of shared headers share one storage; each copy's appended fields are its own")
    func copies() {
        let entry = ProxyHeaders(shared: Self.stored)
        var first = entry
        var second = entry
        first.append(HTTPField(name: .age, value: "1"))
        second.append(HTTPField(name: .age, value: "2"))
        #expect(first[.age] == "1" && second[.age] == "2" && entry[.age] == nil)
        guard case .shared(let one, _) = first.wire, case .shared(let other, _) = second.wire else {
            Issue.record("appending copied the shared fields")
            return
        }
        #expect(one === other)
        #expect(first != second)
    }

    @Test("a literal makes a list of its own, in order")
    func literal() {
        let headers: ProxyHeaders = [.eTag: "\"1\"", .age: "2"]
        Self.expectAgrees(headers, [.eTag: "\"1\"", .age: "2"])
        #expect(ProxyHeaders().isEmpty && ProxyHeaders(shared: [:]).isEmpty)
    }
}
