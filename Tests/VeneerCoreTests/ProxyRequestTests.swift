import HTTPTypes
import NIOCore
import Testing
import VeneerCore

@Suite("ProxyRequest: a value whose copies share storage until one changes")
struct ProxyRequestTests {
    @Test("a copy changed in any part leaves the original as it was, and the original changed leaves the copy; the record stays shared")
    func copiesAreIndependent() {
        let record = RequestRecord()
        let original = ProxyRequest(method: .get, route: .item(.posts, "1"), query: "a=1", headers: [.accept: "text/plain"],
                                    body: ByteBuffer(string: "x"), client: nil, requestID: "id-1", record: record)
        var copy = original
        copy.headers[.accept] = "application/json"
        copy.headers.append(HTTPField(name: .authorization, value: "Bearer t"))
        copy.method = .head
        copy.route = .list(.posts)
        copy.query = nil
        copy.body.writeString("yz")
        copy.requestID = "id-2"
        #expect(original.headers[.accept] == "text/plain" && !original.headers.contains(.authorization))
        #expect(original.method == .get && original.route == .item(.posts, "1") && original.query == "a=1")
        #expect(String(buffer: original.body) == "x" && original.requestID == "id-1")
        #expect(copy.headers[.accept] == "application/json" && copy.headers[.authorization] == "Bearer t")
        #expect(copy.method == .head && copy.route == .list(.posts) && copy.query == nil && String(buffer: copy.body) == "xyz")
        #expect(copy.requestID == "id-2" && copy.record === original.record && copy.pathAndQuery == "/posts")

        var changed = original
        let untouched = changed
        changed.headers[.accept] = nil
        changed.record = RequestRecord()
        #expect(untouched.headers[.accept] == "text/plain" && untouched.record === record && changed.record !== record)
        #expect(original.pathAndQuery == "/posts/1?a=1" && original.isRead && !original.isStreamed)
    }

    @Test("a request changed with no copy around changes in place, and every change reads back")
    func changesInPlace() {
        var request = ProxyRequest(method: .post, route: .list(.posts))
        for index in 0..<20 { request.headers.append(HTTPField(name: HTTPField.Name("X-\(index)")!, value: "\(index)")) }
        request.body.writeString("{}")
        #expect(request.headers.count == 20 && request.headers[HTTPField.Name("X-7")!] == "7" && String(buffer: request.body) == "{}")
    }
}
