import HTTPTypes
import NIOCore
import NIOPosix
import Testing
import VeneerCore
@testable import VeneerOrigins

/// The request head the pooled transport writes, byte for byte: the whole head in one write
/// of the buffer, sized by a first pass over the fields.
@Suite("Outbound request as HTTP/1.1")
struct OutboundRequestHTTP1Tests {
    func written(_ request: OutboundRequest, into buffer: ByteBuffer = ByteBuffer()) -> String {
        var buffer = buffer
        request.writeHTTP1(into: &buffer)
        return String(buffer: buffer)
    }

    func request(_ method: HTTPRequest.Method = .get, url: String = "http://example.test:8080", target: String = "/posts/1", query: String? = nil,
                 headers: HTTPFields = [:], forwardedFor: String? = nil, body: ByteBuffer? = nil, bodyStream: BodyStream? = nil,
                 route: ResourceRoute? = nil) -> OutboundRequest {
        OutboundRequest(method: method, endpoint: Endpoint(url: url)!, target: target, query: query, headers: headers,
                        forwardedFor: forwardedFor, body: body, bodyStream: bodyStream, timeout: .seconds(10), maxResponseBodySize: 1 << 20,
                        streamThreshold: nil, bodyTimeout: .seconds(30), buffers: nil, route: route)
    }

    @Test("a GET without fields of its own: request line, Host, the client's address, the head's end")
    func bare() {
        #expect(written(request(query: "nocache=abcdefghijklmnop-1", forwardedFor: "10.0.0.1"))
            == "GET /posts/1?nocache=abcdefghijklmnop-1 HTTP/1.1\r\nHost: example.test:8080\r\nX-Forwarded-For: 10.0.0.1\r\n\r\n")
        #expect(written(request()) == "GET /posts/1 HTTP/1.1\r\nHost: example.test:8080\r\n\r\n")
    }

    @Test("the caller's fields in their order and spelling, Host and hop-by-hop ones left out, then the body with its length")
    func fieldsAndBody() {
        let fields: HTTPFields = [HTTPField.Name("Host")!: "elsewhere.example", .accept: "application/json", .connection: "keep-alive",
                                  HTTPField.Name("X-Text")!: "café ✓", .te: "trailers", HTTPField.Name("x-lower")!: "v"]
        let body = ByteBuffer(string: #"{"title":"t"}"#)
        #expect(written(request(.post, target: "/v1/posts", headers: fields, forwardedFor: "10.0.0.2", body: body))
            == "POST /v1/posts HTTP/1.1\r\nHost: example.test:8080\r\nAccept: application/json\r\nX-Text: café ✓\r\nx-lower: v\r\n"
            + "X-Forwarded-For: 10.0.0.2\r\nContent-Length: 13\r\n\r\n{\"title\":\"t\"}")
        #expect(written(request(.post, body: ByteBuffer())) == "POST /posts/1 HTTP/1.1\r\nHost: example.test:8080\r\nContent-Length: 0\r\n\r\n")
    }

    @Test("after what the buffer holds already, whatever its room: many long fields")
    func appendsAndGrows() {
        var fields = HTTPFields()
        for index in 0..<40 { fields.append(HTTPField(name: HTTPField.Name("X-Field-\(index)")!, value: String(repeating: "v", count: 150))) }
        var expected = "GET /posts/1 HTTP/1.1\r\nHost: example.test:8080\r\n"
        for index in 0..<40 { expected += "X-Field-\(index): " + String(repeating: "v", count: 150) + "\r\n" }
        expected += "\r\n"
        var small = ByteBuffer()
        small.reserveCapacity(16)
        small.writeString("before")
        #expect(written(request(headers: fields), into: small) == "before" + expected)
    }

    @Test("a streamed body: its Content-Length when known, else chunked, and nothing of it in the head's write")
    func streamedBody() {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let known = BodyStream(eventLoop: loop, expectedLength: 1_234_567, source: nil)
        #expect(written(request(.put, bodyStream: known))
            == "PUT /posts/1 HTTP/1.1\r\nHost: example.test:8080\r\nContent-Length: 1234567\r\n\r\n")
        let unknown = BodyStream(eventLoop: loop, expectedLength: nil, source: nil)
        #expect(written(request(.post, forwardedFor: "10.0.0.3", bodyStream: unknown))
            == "POST /posts/1 HTTP/1.1\r\nHost: example.test:8080\r\nX-Forwarded-For: 10.0.0.3\r\nTransfer-Encoding: chunked\r\n\r\n")
    }

    @Test("a route stands for the target: the endpoint's prefix and its canonical path, written from their parts and read joined; a target set replaces it")
    func routeTarget() {
        let item = request(url: "http://example.test:8080/api/v2", target: "", query: "q=1", route: .item(.posts, "abcdefghijklmnopqrstuvwxyz0123"))
        #expect(item.target == "/api/v2/posts/abcdefghijklmnopqrstuvwxyz0123" && item.pathAndQuery == "/api/v2/posts/abcdefghijklmnopqrstuvwxyz0123?q=1")
        #expect(written(item) == "GET /api/v2/posts/abcdefghijklmnopqrstuvwxyz0123?q=1 HTTP/1.1\r\nHost: example.test:8080\r\n\r\n")
        let list = request(target: "", route: .list(.posts))
        #expect(list.target == "/posts" && written(list) == "GET /posts HTTP/1.1\r\nHost: example.test:8080\r\n\r\n")
        var set = list
        set.target = "/other/7"
        #expect(set.route == nil && set.target == "/other/7" && written(set) == "GET /other/7 HTTP/1.1\r\nHost: example.test:8080\r\n\r\n")
    }
}
