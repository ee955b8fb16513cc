import HTTPTypes
import NIOCore
import Testing
import VeneerCore
@testable import VeneerRuntime

/// The bytes a response becomes on the wire.
@Suite("Response serialization")
struct ResponseWriterTests {
    func wire(_ response: ProxyResponse, method: HTTPRequest.Method = .get, close: Bool = false) -> String {
        var buffer = ByteBuffer()
        HTTP1ResponseWriter.write(response, method: method, close: close, dates: HTTPDateCache(), into: &buffer)
        return String(buffer: buffer)
    }

    func fields(_ pairs: [(String, String)]) -> HTTPFields {
        var fields = HTTPFields()
        for (name, value) in pairs { fields.append(HTTPField(name: HTTPField.Name(name)!, value: value)) }
        return fields
    }

    @Test("hop-by-hop fields and those Connection names never reach the client; Content-Length comes from the body")
    func hopByHop() {
        let response = ProxyResponse(status: .ok, headers: fields([
            ("Connection", "X-Hop, keep-alive"), ("X-Hop", "1"), ("Keep-Alive", "timeout=5"), ("Transfer-Encoding", "chunked"),
            ("Content-Length", "999"), ("X-End", "2"), ("Date", "Mon, 23 Nov 2026 06:00:00 GMT"),
        ]), body: ByteBuffer(string: "{}"))
        #expect(wire(response) == "HTTP/1.1 200 OK\r\nX-End: 2\r\nDate: Mon, 23 Nov 2026 06:00:00 GMT\r\nContent-Length: 2\r\n\r\n{}")
    }

    @Test("HEAD keeps the length the GET answer would have; 204 and 304 have neither body nor length")
    func bodiless() {
        let head = ProxyResponse(status: .ok, headers: fields([("Content-Length", "31"), ("Date", "x")]))
        #expect(wire(head, method: .head) == "HTTP/1.1 200 OK\r\nDate: x\r\nContent-Length: 31\r\n\r\n")
        let headOfBody = ProxyResponse(status: .ok, headers: fields([("Date", "x")]), body: ByteBuffer(string: "abc"))
        #expect(wire(headOfBody, method: .head) == "HTTP/1.1 200 OK\r\nDate: x\r\nContent-Length: 3\r\n\r\n")
        let notModified = ProxyResponse(status: .notModified, headers: fields([("ETag", "\"a\""), ("Date", "x")]), body: ByteBuffer(string: "ignored"))
        #expect(wire(notModified) == "HTTP/1.1 304 Not Modified\r\nETag: \"a\"\r\nDate: x\r\n\r\n")
        #expect(wire(ProxyResponse(status: .noContent, headers: fields([("Date", "x")]))) == "HTTP/1.1 204 No Content\r\nDate: x\r\n\r\n")
    }

    @Test("serialized leading fields are copied as they are, and forgotten once the fields change")
    func serializedPrefix() {
        let stored = fields([("ETag", "\"a\""), ("X-Stored", "1"), ("Content-Length", "9"), ("Date", "x")])
        var kept = ProxyResponse(status: .ok, headers: stored, serializedPrefix: SerializedFields(stored), body: ByteBuffer(string: "{}"))
        kept.appendHeader(HTTPField(name: .age, value: "3"))
        #expect(kept.serializedPrefix != nil)
        #expect(wire(kept) == "HTTP/1.1 200 OK\r\nETag: \"a\"\r\nX-Stored: 1\r\nDate: x\r\nAge: 3\r\nContent-Length: 2\r\n\r\n{}")
        // Fields appended to serialized ones stay apart but are part of the headers for readers.
        #expect(kept.storedHeaders == stored)
        #expect(kept.appendedFields.map(\.value) == ["3"])
        #expect(kept.headers[.age] == "3" && kept.headers.count == stored.count + 1)
        #expect(kept.containsHeader(.age) && kept.containsHeader(.eTag) && !kept.containsHeader(.location))
        #expect(kept.header(.age) == "3" && kept.header(.eTag) == "\"a\"" && kept.header(.location) == nil)

        var changed = kept
        changed.headers[HTTPField.Name("X-Stored")!] = nil
        #expect(changed.serializedPrefix == nil && changed.appendedFields.isEmpty)
        #expect(wire(changed) == "HTTP/1.1 200 OK\r\nETag: \"a\"\r\nDate: x\r\nAge: 3\r\nContent-Length: 2\r\n\r\n{}")

        var replaced = kept
        replaced.headers = fields([("X-Other", "2"), ("Date", "y")])
        #expect(wire(replaced) == "HTTP/1.1 200 OK\r\nX-Other: 2\r\nDate: y\r\nContent-Length: 2\r\n\r\n{}")

        // A prefix made from other fields is not taken.
        let mismatched = ProxyResponse(status: .ok, headers: fields([("Date", "z")]), serializedPrefix: SerializedFields(stored), body: ByteBuffer())
        #expect(mismatched.serializedPrefix == nil)
    }

    @Test("an upstream answer is stamped with the request id without making its fields, also when it echoes the id")
    func stampedFromLines() throws {
        func upstream(_ fields: String) throws -> ProxyResponse {
            var parser = HTTP1ResponseParser(maxBodySize: 100)
            parser.append(ByteBuffer(string: "HTTP/1.1 200 OK\r\n\(fields)Content-Length: 2\r\n\r\n{}"))
            return try #require(try parser.next(requestMethod: .get)).response
        }
        let plain = ProxyEdge.stamped(try upstream("Date: x\r\n"), "id-1")
        #expect(plain.serializedPrefix != nil && plain.appendedFields.map(\.value) == ["id-1"])
        #expect(wire(plain) == "HTTP/1.1 200 OK\r\nDate: x\r\nX-Request-Id: id-1\r\nContent-Length: 2\r\n\r\n{}")
        let echoed = ProxyEdge.stamped(try upstream("Date: x\r\nX-Request-Id: id-1\r\n"), "id-1")
        #expect(echoed.serializedPrefix != nil && echoed.appendedFields.isEmpty && echoed.header(.xRequestID) == "id-1")
        let other = ProxyEdge.stamped(try upstream("Date: x\r\nx-request-id: theirs\r\n"), "id-1")
        #expect(other.headers[values: .xRequestID] == ["id-1"])
        #expect(wire(other) == "HTTP/1.1 200 OK\r\nDate: x\r\nX-Request-Id: id-1\r\nContent-Length: 2\r\n\r\n{}")
    }

    @Test("a Date is added when there is none, Connection: close when the connection ends, control characters leave the reason")
    func dateCloseReason() {
        let text = wire(ProxyResponse(status: HTTPResponse.Status(code: 599, reasonPhrase: "Odd\tOne"), body: ByteBuffer(string: "x")), close: true)
        #expect(text.hasPrefix("HTTP/1.1 599 Odd\tOne\r\nContent-Length: 1\r\nDate: "))
        #expect(text.hasSuffix(" GMT\r\nConnection: close\r\n\r\nx"))
    }
}
