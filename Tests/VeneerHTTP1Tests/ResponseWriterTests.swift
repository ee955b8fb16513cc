import HTTPTypes
import NIOCore
import Testing
import VeneerCore
@testable import VeneerHTTP1

/// The bytes a response becomes on the wire.
@Suite("Response serialization")
struct ResponseWriterTests {
    func wire(_ response: ProxyResponse, method: HTTPRequest.Method = .get, close: Bool = false) -> String {
        var buffer = ByteBuffer()
        HTTP1ResponseWriter.write(response, method: method, close: close, date: "Mon, 23 Nov 2026 06:00:00 GMT", into: &buffer)
        return String(buffer: buffer)
    }

    func fields(_ pairs: [(String, String)]) -> HTTPFields {
        var fields = HTTPFields()
        for (name, value) in pairs { fields.append(HTTPField(name: HTTPField.Name(name)!, value: value)) }
        return fields
    }

    func headers(_ pairs: [(String, String)]) -> ProxyHeaders {
        ProxyHeaders(fields(pairs))
    }

    @Test("the head written in one pass is the head written piece by piece, whatever the answer's fields, status, method and framing")
    func onePassMatchesPieceByPiece() {
        let shapes: [(ProxyHeaders, [(String, String)])] = [
            (ProxyHeaders(), []),
            (headers([("ETag", "\"a\""), ("Date", "x"), ("Content-Length", "12"), ("Keep-Alive", "1")]), []),
            (ProxyHeaders(shared: fields([("ETag", "\"a\""), ("X-Stored", "1"), ("Content-Length", "9")])), [("Age", "3"), ("Cache-Status", "veneer; hit; ttl=3600")]),
            (ProxyHeaders(shared: fields([("X-Stored", "1")])), [("Date", "y"), ("Content-Length", "77"), ("Upgrade", "h2c"), ("X-Request-Id", "abc")]),
            (ProxyHeaders(shared: fields([("Date", "z"), ("Connection", "X-Stored"), ("X-Stored", "1")])), [("Age", "1")]),
            (ProxyHeaders(shared: fields([("X-Stored", "1")])), [("Connection", "close, X-Appended"), ("X-Appended", "2")]),
        ]
        let statuses: [HTTPResponse.Status] = [.ok, .notModified, .noContent, .partialContent, .init(code: 599, reasonPhrase: "Odd\u{7F}\tone"),
                                               .init(code: 299, reasonPhrase: "")]
        let framings: [(streamed: Bool, length: Int?, chunked: Bool)] = [(false, nil, false), (true, 1234, false), (true, nil, true), (true, nil, false)]
        var compared = 0
        for (stored, appended) in shapes {
            for status in statuses {
                for method in [HTTPRequest.Method.get, .head] {
                    for close in [false, true] {
                        for framing in framings {
                            var headers = stored
                            for (name, value) in appended { headers.append(HTTPField(name: HTTPField.Name(name)!, value: value)) }
                            let body = method == .head && status == .ok ? ByteBuffer() : ByteBuffer(string: "{\"id\":1}")
                            let response = ProxyResponse(status: status, headers: headers, body: body)
                            let close = close || (framing.streamed && framing.length == nil && !framing.chunked)
                            var onePass = ByteBuffer(), pieces = ByteBuffer()
                            HTTP1ResponseWriter.write(response, method: method, close: close, streamed: framing.streamed, length: framing.length,
                                                      chunked: framing.chunked, date: "Mon, 23 Nov 2026 06:00:00 GMT", into: &onePass)
                            HTTP1ResponseWriter.writePieceByPiece(response, method: method, close: close, streamed: framing.streamed,
                                                                  length: framing.length, chunked: framing.chunked,
                                                                  date: "Mon, 23 Nov 2026 06:00:00 GMT", into: &pieces)
                            #expect(String(buffer: onePass) == String(buffer: pieces), "\(status) \(method) close=\(close) \(framing) \(appended)")
                            compared += 1
                        }
                    }
                }
            }
        }
        #expect(compared == 6 * 6 * 2 * 2 * 4)
        // Appended to a buffer that holds something already, as a connection's reused one may.
        var buffer = ByteBuffer(string: "before")
        HTTP1ResponseWriter.write(ProxyResponse(status: .ok, headers: headers([("X-A", "1")]), body: ByteBuffer(string: "{}")), method: .get, close: false,
                                  date: "d", into: &buffer)
        #expect(String(buffer: buffer) == "beforeHTTP/1.1 200 OK\r\nX-A: 1\r\nContent-Length: 2\r\nDate: d\r\n\r\n{}")
    }

    @Test("hop-by-hop fields and those Connection names never reach the client; Content-Length comes from the body")
    func hopByHop() {
        let response = ProxyResponse(status: .ok, headers: headers([
            ("Connection", "X-Hop, keep-alive"), ("X-Hop", "1"), ("Keep-Alive", "timeout=5"), ("Transfer-Encoding", "chunked"),
            ("Content-Length", "999"), ("X-End", "2"), ("Date", "Mon, 23 Nov 2026 06:00:00 GMT"),
        ]), body: ByteBuffer(string: "{}"))
        #expect(wire(response) == "HTTP/1.1 200 OK\r\nX-End: 2\r\nDate: Mon, 23 Nov 2026 06:00:00 GMT\r\nContent-Length: 2\r\n\r\n{}")
    }

    @Test("HEAD keeps the length the GET answer would have; 204 and 304 have neither body nor length")
    func bodiless() {
        let head = ProxyResponse(status: .ok, headers: headers([("Content-Length", "31"), ("Date", "x")]))
        #expect(wire(head, method: .head) == "HTTP/1.1 200 OK\r\nDate: x\r\nContent-Length: 31\r\n\r\n")
        let headOfBody = ProxyResponse(status: .ok, headers: headers([("Date", "x")]), body: ByteBuffer(string: "abc"))
        #expect(wire(headOfBody, method: .head) == "HTTP/1.1 200 OK\r\nDate: x\r\nContent-Length: 3\r\n\r\n")
        let notModified = ProxyResponse(status: .notModified, headers: headers([("ETag", "\"a\""), ("Date", "x")]), body: ByteBuffer(string: "ignored"))
        #expect(wire(notModified) == "HTTP/1.1 304 Not Modified\r\nETag: \"a\"\r\nDate: x\r\n\r\n")
        #expect(wire(ProxyResponse(status: .noContent, headers: headers([("Date", "x")]))) == "HTTP/1.1 204 No Content\r\nDate: x\r\n\r\n")
    }

    @Test("a streamed answer's head has no Content-Length (its body ends with the connection); its HEAD has no body either")
    func streamed() {
        let events = ProxyResponse(status: .ok, headers: headers([("Content-Type", "text/event-stream"), ("Content-Length", "9"), ("Date", "x")]),
                                   body: ByteBuffer(string: ": hello\n\n"))
        var buffer = ByteBuffer()
        HTTP1ResponseWriter.write(events, method: .get, close: true, streamed: true, date: "y", into: &buffer)
        #expect(String(buffer: buffer) == "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nDate: x\r\nConnection: close\r\n\r\n: hello\n\n")
        buffer.clear()
        HTTP1ResponseWriter.write(events, method: .head, close: false, streamed: true, date: "y", into: &buffer)
        #expect(String(buffer: buffer) == "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nDate: x\r\n\r\n")
    }

    @Test("shared fields are copied as lines made once and kept with them, appended fields after them; any other change writes the fields anew")
    func sharedFields() throws {
        let entry = ProxyHeaders(shared: fields([("ETag", "\"a\""), ("X-Stored", "1"), ("Content-Length", "9"), ("Date", "x")]))
        var kept = ProxyResponse(status: .ok, headers: entry, body: ByteBuffer(string: "{}"))
        kept.headers.append(HTTPField(name: .age, value: "3"))
        #expect(wire(kept) == "HTTP/1.1 200 OK\r\nETag: \"a\"\r\nX-Stored: 1\r\nDate: x\r\nAge: 3\r\nContent-Length: 2\r\n\r\n{}")
        guard case .shared(let storage, let appended) = kept.headers.wire else {
            Issue.record("appending made the shared fields the response's own")
            return
        }
        #expect(appended.map(\.value) == ["3"])
        let lines = storage.lines { _ in
            Issue.record("the lines were made again")
            return SerializedFields.lines(of: [:])
        }
        #expect(String(decoding: lines.bytes, as: UTF8.self) == "ETag: \"a\"\r\nX-Stored: 1\r\nDate: x\r\n" && lines.declaredLength == "9")
        // A second answer from the same entry copies the lines made for the first.
        var again = ProxyResponse(status: .ok, headers: entry, body: ByteBuffer(string: "[]"))
        again.headers.append(HTTPField(name: .age, value: "4"))
        #expect(wire(again) == "HTTP/1.1 200 OK\r\nETag: \"a\"\r\nX-Stored: 1\r\nDate: x\r\nAge: 4\r\nContent-Length: 2\r\n\r\n[]")

        var changed = kept
        changed.headers[HTTPField.Name("X-Stored")!] = nil
        guard case .fields = changed.headers.wire else {
            Issue.record("a changed response still writes the shared lines")
            return
        }
        #expect(wire(changed) == "HTTP/1.1 200 OK\r\nETag: \"a\"\r\nDate: x\r\nAge: 3\r\nContent-Length: 2\r\n\r\n{}")
        #expect(wire(kept).contains("X-Stored: 1"), "the entry's own fields did not change")

        var replaced = kept
        replaced.headers = ProxyHeaders(fields([("X-Other", "2"), ("Date", "y")]))
        #expect(wire(replaced) == "HTTP/1.1 200 OK\r\nX-Other: 2\r\nDate: y\r\nContent-Length: 2\r\n\r\n{}")
    }

    @Test("the names looked up on every answer are told absent from a cacheable answer's lines without reading them")
    func nameBitsOfUsualFields() {
        let usual = fields([
            ("Server", "nginx"), ("Date", "x"), ("Content-Type", "application/json"), ("Last-Modified", "y"), ("ETag", "\"a\""),
            ("Cache-Control", "public, max-age=3600"), ("Accept-Ranges", "bytes"), ("Expires", "z"), ("Vary", "Accept-Encoding"),
            ("Content-Encoding", "gzip"), ("X-Content-Type-Options", "nosniff"), ("Strict-Transport-Security", "max-age=1"),
            ("X-Frame-Options", "DENY"), ("Access-Control-Allow-Origin", "*"), ("Set-Cookie", "a=b"), ("Pragma", "x"), ("Via", "1.1 a"),
        ])
        let lines = SerializedFields.lines(of: usual)
        for name: HTTPField.Name in [.cacheStatus, .xRequestID, .serverTiming, HTTPField.Name("Veneer-Cache-Control")!] {
            var canonical = name.canonicalName
            let mask = canonical.withUTF8 { SerializedFields.nameMask(UnsafeRawBufferPointer($0)) }
            #expect(lines.nameBits & mask != mask, "\(name) would read the lines")
            #expect(!SerializedFields.contains(name, in: lines))
        }
        // Every stored name is found, in any case.
        for field in usual {
            #expect(SerializedFields.contains(field.name, in: lines), "\(field.name)")
            #expect(SerializedFields.values(field.name, in: lines) == [field.value])
            #expect(SerializedFields.contains(HTTPField.Name(field.name.rawName.uppercased())!, in: lines))
        }
    }

    @Test("a Date is added when there is none, Connection: close when the connection ends, control characters leave the reason")
    func dateCloseReason() {
        let text = wire(ProxyResponse(status: HTTPResponse.Status(code: 599, reasonPhrase: "Odd\tOne"), body: ByteBuffer(string: "x")), close: true)
        #expect(text.hasPrefix("HTTP/1.1 599 Odd\tOne\r\nContent-Length: 1\r\nDate: "))
        #expect(text.hasSuffix(" GMT\r\nConnection: close\r\n\r\nx"))
    }

    /// IANA's HTTP Status Code Registry, 2026: what every status line says, whatever the reason given.
    static let registry: [(Int, String)] = [
        (100, "Continue"), (101, "Switching Protocols"), (102, "Processing"), (103, "Early Hints"), (200, "OK"), (201, "Created"),
        (202, "Accepted"), (203, "Non-Authoritative Information"), (204, "No Content"), (205, "Reset Content"), (206, "Partial Content"),
        (207, "Multi-Status"), (208, "Already Reported"), (226, "IM Used"), (300, "Multiple Choices"), (301, "Moved Permanently"),
        (302, "Found"), (303, "See Other"), (304, "Not Modified"), (305, "Use Proxy"), (307, "Temporary Redirect"),
        (308, "Permanent Redirect"), (400, "Bad Request"), (401, "Unauthorized"), (402, "Payment Required"), (403, "Forbidden"),
        (404, "Not Found"), (405, "Method Not Allowed"), (406, "Not Acceptable"), (407, "Proxy Authentication Required"),
        (408, "Request Timeout"), (409, "Conflict"), (410, "Gone"), (411, "Length Required"), (412, "Precondition Failed"),
        (413, "Content Too Large"), (414, "URI Too Long"), (415, "Unsupported Media Type"), (416, "Range Not Satisfiable"),
        (417, "Expectation Failed"), (421, "Misdirected Request"), (422, "Unprocessable Content"), (423, "Locked"),
        (424, "Failed Dependency"), (425, "Too Early"), (426, "Upgrade Required"), (428, "Precondition Required"),
        (429, "Too Many Requests"), (431, "Request Header Fields Too Large"), (451, "Unavailable For Legal Reasons"),
        (500, "Internal Server Error"), (501, "Not Implemented"), (502, "Bad Gateway"), (503, "Service Unavailable"),
        (504, "Gateway Timeout"), (505, "HTTP Version Not Supported"), (506, "Variant Also Negotiates"), (507, "Insufficient Storage"),
        (508, "Loop Detected"), (510, "Not Extended"), (511, "Network Authentication Required"),
    ]

    @Test("every registered status is sent with its standard reason phrase, whether the answer had none (a stored or replayed one) or another")
    func reasonPhrases() {
        for (code, reason) in Self.registry {
            for given in ["", "Whatever"] {
                let line = wire(ProxyResponse(status: HTTPResponse.Status(code: code, reasonPhrase: given))).prefix { $0 != "\r\n" }
                #expect(line == "HTTP/1.1 \(code) \(reason)", "\(code) given '\(given)'")
            }
        }
        let registered = Set(Self.registry.map(\.0))
        for code in 100...599 where !registered.contains(code) {
            #expect(wire(ProxyResponse(status: HTTPResponse.Status(code: code))).hasPrefix("HTTP/1.1 \(code) \r\n"), "\(code) has no standard phrase")
        }
    }
}
