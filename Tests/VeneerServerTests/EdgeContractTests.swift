import Foundation
import Testing
import VeneerCore
import VeneerTestSupport

let mockYAML = """
    environments:
      development:
        resources: [posts, { name: comments, id: string }]
        limits: { request_body: 1KB }
        origin: { mock: {} }
    """

@Suite("The HTTP surface and its error contract")
struct EdgeContractTests {
    @Test("create then get through the server; list; 201 and 200")
    func crud() async throws {
        try await withVeneer(yaml: mockYAML) { (veneer: RunningVeneer) async throws in
            let created = try await veneer.request("POST", "/posts", headers: [("Content-Type", "application/json")], body: #"{"title":"t","body":"b","x":[1]}"#)
            #expect(created.status == 201)
            #expect(created.text == #"{"id":1,"title":"t","body":"b","x":[1]}"#)
            #expect(try await veneer.request("GET", "/posts/1").text == created.text)
            #expect(try await veneer.request("GET", "/posts").text == "[\(created.text)]")
            #expect(try await veneer.request("PATCH", "/posts/1", body: #"{"title":"u"}"#).status == 200)
            #expect(try await veneer.request("DELETE", "/posts/1").status == 204)
            #expect(try await veneer.request("GET", "/posts/1").status == 404)
        }
    }

    @Test("errors Veneer produces are JSON with a code and a message", arguments: [
        ("GET", "/nothing", nil as String?, 404, "not_found"),
        ("GET", "/", nil, 404, "not_found"),
        ("GET", "/posts/abc", nil, 400, "bad_request"),
        ("GET", "/posts/-1", nil, 400, "bad_request"),
        ("POST", "/posts", "{not json", 400, "bad_request"),
        ("POST", "/posts", #"{"body":"no title"}"#, 400, "bad_request"),
        ("POST", "/posts", #"{"title":1,"body":"b"}"#, 400, "bad_request"),
        ("PUT", "/posts/1", #"{"title":"t"}"#, 400, "bad_request"),
        ("POST", "/posts", String(repeating: "x", count: 2000), 413, "payload_too_large"),
        ("DELETE", "/posts", nil, 405, "method_not_allowed"),
        ("POST", "/posts/1", "{}", 405, "method_not_allowed"),
        ("GET", "/-/nothing", nil, 404, "not_found"),
        ("POST", "/-/health", "", 405, "method_not_allowed"),
    ])
    func errors(_ method: String, _ target: String, _ body: String?, _ status: Int, _ code: String) async throws {
        try await withVeneer(yaml: mockYAML) { (veneer: RunningVeneer) async throws in
            let response = try await veneer.request(method, target, body: body)
            #expect(response.status == status)
            #expect(response.errorCode == code)
            #expect(response.header("Content-Type") == "application/json")
            #expect((response.json?["message"] as? String)?.isEmpty == false)
            #expect(response.header("X-Request-Id") != nil)
        }
    }

    @Test("405 answers list the allowed methods in Allow")
    func allow() async throws {
        try await withVeneer(yaml: mockYAML) { (veneer: RunningVeneer) async throws in
            #expect(try await veneer.request("DELETE", "/posts").header("Allow") == "GET, HEAD, POST")
            #expect(try await veneer.request("OPTIONS", "/posts/1").header("Allow") == "GET, HEAD, PUT, PATCH, DELETE")
        }
    }

    @Test("a chunked body over the limit is 413 too")
    func chunkedTooLarge() async throws {
        try await withVeneer(yaml: mockYAML) { (veneer: RunningVeneer) async throws in
            let chunk = String(repeating: "y", count: 600)
            let raw = "POST /posts HTTP/1.1\r\nHost: \(veneer.host)\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                + "258\r\n\(chunk)\r\n258\r\n\(chunk)\r\n0\r\n\r\n"
            let response = try await RawHTTP.send(port: veneer.port, Array(raw.utf8))
            #expect(response.status == 413)
            #expect(response.errorCode == "payload_too_large")
        }
    }

    @Test("X-Request-Id is passed on, or generated when missing or unusable")
    func requestID() async throws {
        try await withVeneer(yaml: mockYAML) { (veneer: RunningVeneer) async throws in
            #expect(try await veneer.request("GET", "/posts", headers: [("X-Request-Id", "abc-123")]).header("X-Request-Id") == "abc-123")
            let generated = try await veneer.request("GET", "/posts").header("X-Request-Id")
            #expect(generated?.count == RequestID.length)
            let replaced = try await veneer.request("GET", "/posts", headers: [("X-Request-Id", String(repeating: "a", count: 300))]).header("X-Request-Id")
            #expect(replaced?.count == RequestID.length)
        }
    }

    @Test("HEAD answers like GET without a body; string-id collections work like posts")
    func headAndCollections() async throws {
        try await withVeneer(yaml: mockYAML) { (veneer: RunningVeneer) async throws in
            _ = try await veneer.request("POST", "/posts", body: #"{"title":"t","body":"b"}"#)
            let head = try await veneer.request("HEAD", "/posts/1")
            #expect(head.status == 200 && head.body.isEmpty && head.header("Content-Length") == "31")
            #expect(try await veneer.request("POST", "/comments", body: #"{"id":"c-1","text":"hi"}"#).status == 201)
            #expect(try await veneer.request("GET", "/comments/c-1").json?["text"] as? String == "hi")
            #expect(try await veneer.request("GET", "/comments/..").status == 400)
        }
    }

    @Test("request headers over the header limit are refused")
    func headerLimit() async throws {
        let yaml = "environments: {development: {origin: {mock: {}}, limits: {request_headers: 2KB}}}"
        try await withVeneer(yaml: yaml) { (veneer: RunningVeneer) async throws in
            let response = try await veneer.request("GET", "/posts", headers: [("X-Big", String(repeating: "z", count: 4096))])
            #expect(response.status == 400)
            #expect(response.errorCode == "bad_request")
            #expect((response.json?["message"] as? String)?.contains("headers") == true)
        }
    }
}
