import HTTPTypes
import NIOCore
import Testing
import VeneerCore
@testable import VeneerHTTP1

/// The HTTP/1.1 request and response parsers on their own: framing, pipelining, partial
/// input, and the malformed and ambiguous messages they must refuse.
@Suite("HTTP/1.1 parsers")
struct HTTP1ParserTests {
    /// Every event the bytes make, fed in pieces of `step` bytes (0: all at once).
    static func requestEvents(_ text: String, step: Int = 0, bodyLimit: Int = 1 << 20, maxHead: Int = 8192) throws(HTTP1ParseError) -> [HTTP1RequestParser.Event] {
        var parser = HTTP1RequestParser(maxHeadSize: maxHead, maxFields: 20, bodyLimit: bodyLimit)
        var events: [HTTP1RequestParser.Event] = []
        let bytes = Array(text.utf8)
        let size = step == 0 ? max(bytes.count, 1) : step
        var offset = 0
        while offset < bytes.count {
            parser.append(ByteBuffer(bytes: bytes[offset..<min(offset + size, bytes.count)]))
            offset += size
            while let event = try parser.next() { events.append(event) }
        }
        return events
    }

    static func requests(_ text: String, step: Int = 0) throws -> [(HTTP1RequestParser.Head, String)] {
        try requestEvents(text, step: step).compactMap { event in
            if case .request(let head, let body) = event { return (head, String(buffer: body)) }
            return nil
        }
    }

    static func refusal(_ text: String) -> HTTP1ParseError? {
        do {
            _ = try requestEvents(text)
            return nil
        } catch {
            return error
        }
    }

    @Test("a request header value is UTF-8 kept byte for byte, or refused: obs-text that is not UTF-8 is never rewritten to U+FFFD")
    func obsText() throws {
        func parse(_ value: [UInt8]) throws(HTTP1ParseError) -> HTTP1RequestParser.Head? {
            var parser = HTTP1RequestParser(maxHeadSize: 8192, maxFields: 20, bodyLimit: 1 << 20)
            parser.append(ByteBuffer(bytes: Array("GET /posts HTTP/1.1\r\nHost: h\r\nX-Name: ".utf8) + value + Array("\r\n\r\n".utf8)))
            guard case .request(let head, _)? = try parser.next() else { return nil }
            return head
        }
        let utf8 = Array("caf\u{E9} \u{1F600}".utf8)
        let head = try #require(try parse(utf8))
        let field = try #require(head.fields.first { $0.name.canonicalName == "x-name" })
        field.withUnsafeBytesOfValue { #expect(Array($0) == utf8) }
        for invalid: [UInt8] in [[0x63, 0x61, 0x66, 0xE9], [0xFF], [0xF0, 0x9F, 0x98], [0xC0, 0xAF], [0xED, 0xA0, 0x80]] {
            #expect(throws: HTTP1ParseError.self, "\(invalid)") { _ = try parse(invalid) }
        }
    }

    @Test("a request refused for its framing, or for a bad chunk, is noted as interrupted with its head and the body bytes read")
    func interruptedByRefusal() {
        func interrupted(_ text: String) -> (target: String, method: HTTPRequest.Method, bodyBytes: Int)? {
            var parser = HTTP1RequestParser(maxHeadSize: 8192, maxFields: 20, bodyLimit: 1 << 20)
            parser.append(ByteBuffer(string: text))
            do {
                while try parser.next() != nil {}
                return nil
            } catch {
                return parser.interrupted.map { ($0.head.target, $0.head.method, $0.bodyBytes) }
            }
        }
        let framings = [
            "POST /posts HTTP/1.0\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST /posts HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
            "POST /posts HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n",
            "POST /posts HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
        ]
        for text in framings {
            let noted = interrupted(text)
            #expect(noted?.target == "/posts" && noted?.method == .post && noted?.bodyBytes == 0, "\(text)")
        }
        // A bad chunk after the first: the bytes of the body read so far.
        let noted = interrupted("PUT /posts/1 HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\nzz\r\n")
        #expect(noted?.target == "/posts/1" && noted?.method == .put && noted?.bodyBytes == 3)
        // A head that is not one: nothing to note.
        #expect(interrupted("GET /posts HTTP/2.0\r\nHost: h\r\n\r\n") == nil)
        #expect(interrupted("GET / HTTP/1.1\r\nHost: h\r\nBad Name: x\r\n\r\n") == nil)
    }

    @Test("a GET becomes method, target, fields without Host, and the authority")
    func simpleGet() throws {
        let requests = try Self.requests("GET /posts/1?x=2 HTTP/1.1\r\nHost: example.test:8080\r\nAccept: application/json\r\nX-Custom:  padded \t\r\n\r\n")
        let (head, body) = try #require(requests.first)
        #expect(requests.count == 1 && body.isEmpty)
        #expect(head.method == .get && head.target == "/posts/1?x=2" && head.minorVersion == 1)
        #expect(head.authority == "example.test:8080")
        #expect(head.fields[.accept] == "application/json")
        #expect(head.fields[HTTPField.Name("X-Custom")!] == "padded")
        #expect(!head.fields.contains { $0.name.canonicalName == "host" })
        #expect(head.keepAlive && !head.expectsContinue)
        #expect(head.request.path == "/posts/1?x=2")
    }

    @Test("pipelined requests come out in order, whether the bytes arrive at once or one by one", arguments: [0, 1, 7])
    func pipelined(step: Int) throws {
        let text = "GET /posts/1 HTTP/1.1\r\nHost: h\r\n\r\n"
            + "POST /posts HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\n{\"title\":1}"
            + "PUT /posts/2 HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\nTrailer-Field: x\r\n\r\n"
            + "\r\nDELETE /posts/3 HTTP/1.1\r\nHost: h\r\n\r\n"
        let requests = try Self.requests(text, step: step)
        #expect(requests.map(\.0.method) == [.get, .post, .put, .delete])
        #expect(requests.map(\.1) == ["", "{\"title\":1}", "{\"a\":1}", ""])
        #expect(requests[2].0.fields[.transferEncoding] == "chunked")
    }

    @Test("keep-alive follows the version and Connection")
    func keepAlive() throws {
        let cases: [(String, Bool)] = [
            ("GET / HTTP/1.1\r\nHost: h\r\n\r\n", true),
            ("GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, Close\r\n\r\n", false),
            ("GET / HTTP/1.0\r\n\r\n", false),
            ("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", true),
        ]
        for (text, expected) in cases {
            let head = try #require(try Self.requests(text).first).0
            #expect(head.keepAlive == expected, "\(text)")
        }
    }

    @Test("the absolute form keeps what follows the authority")
    func absoluteForm() throws {
        let head = try #require(try Self.requests("GET http://api.test:81/posts/7?q HTTP/1.1\r\nHost: other\r\n\r\n").first).0
        #expect(head.target == "/posts/7?q" && head.authority == "api.test:81")
    }

    @Test("Expect: 100-continue announces the head before the body arrives")
    func expectContinue() throws {
        var parser = HTTP1RequestParser(maxHeadSize: 8192, bodyLimit: 100)
        parser.append(ByteBuffer(string: "POST /posts HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n"))
        guard case .waitingForBody(let head)? = try parser.next() else {
            Issue.record("no waitingForBody event")
            return
        }
        #expect(head.expectsContinue)
        #expect(try parser.next() == nil)
        parser.append(ByteBuffer(string: "{}"))
        guard case .request(_, let body)? = try parser.next() else {
            Issue.record("no request")
            return
        }
        #expect(String(buffer: body) == "{}")
    }

    @Test("a body over the limit stops the parser, declared or chunked")
    func tooLarge() throws {
        let declared = try Self.requestEvents("POST /posts HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\nGET / HTTP/1.1\r\n", bodyLimit: 10)
        guard declared.count == 1, case .tooLarge(let head) = declared[0] else {
            Issue.record("expected one tooLarge, got \(declared)")
            return
        }
        #expect(head.method == .post)
        let chunked = try Self.requestEvents("POST /posts HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n12345678\r\n8\r\n12345678\r\n0\r\n\r\n", bodyLimit: 10)
        guard chunked.count == 1, case .tooLarge = chunked[0] else {
            Issue.record("expected one tooLarge, got \(chunked)")
            return
        }
    }

    @Test("chunk extensions in the grammar are accepted and dropped: names, tokens, quoted strings")
    func chunkExtensions() throws {
        let text = "PUT /p HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
            + "4;a=\"x; \\\"y\";b;c=d\r\nabcd\r\n2;e\r\nef\r\n0\r\n\r\n"
        let requests = try Self.requests(text)
        #expect(requests.count == 1 && requests.first?.1 == "abcdef")
    }

    @Test("ambiguous framing and malformed heads are refused", arguments: [
        "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
        "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: +3\r\n\r\nabc",
        "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0x3\r\n\r\nabc",
        "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\nX-Folded: a\r\n b\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\nX-Space : a\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\nX-Bare: lf\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\nX-Nul: a\u{0}b\r\n\r\n",
        "GET / HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        "GET / HTTP/2.0\r\nHost: h\r\n\r\n",
        "GET /a b HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET  / HTTP/1.1\r\nHost: h\r\n\r\n",
        "G(T / HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET /\u{7F} HTTP/1.1\r\nHost: h\r\n\r\n",
        // Found by the differential fuzz target (NIO refuses them): a target in no form of
        // RFC 9112 §3.2, and control characters in a field value (RFC 9110 §5.5).
        "POST p/osts HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n",
        "GET posts HTTP/1.1\r\nHost: h\r\n\r\n",
        "CONNECT #sts HTTP/1.1\r\nHost: h\r\n\r\n",
        // Absolute forms whose authority is not a host and port (the first found by the differential target).
        "GET http://Close#Rangeposts/2 HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET http://h/a#frag HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET http://user@h/ HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET http:///posts HTTP/1.1\r\nHost: h\r\n\r\n",
        "PROPFIND /dav HTTP/1.1\r\nHost: h\r\nDepth:\u{5} 1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\nX-Del: a\u{7F}b\r\n\r\n",
        // Chunk extensions out of RFC 9112 §7.1.1's grammar (the first found by the differential target).
        "PUT / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=\u{11}\r\nabcd\r\n0\r\n\r\n",
        "PUT / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n4;\r\nabcd\r\n0\r\n\r\n",
        "PUT / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n4;a=b c\r\nabcd\r\n0\r\n\r\n",
        "PUT / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n4;a=\"open\r\nabcd\r\n0\r\n\r\n",
        "PUT / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n4 x\r\nabcd\r\n0\r\n\r\n",
        // Framing fields as trailers (the first found by the differential target).
        "PUT / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\nTransfer-Encoding: chx\r\n\r\n",
        "PUT / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\ncontent-length: 5\r\n\r\n",
        "PUT / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\nX-T: c\u{17}x\r\n\r\n",
        // Whitespace in a chunk line (the grammar's BWS, which NIO refuses; the first found by the differential target).
        "PUT / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n4;a=\"b\" \r\nabcd\r\n0\r\n\r\n",
        "PUT / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n4 \r\nabcd\r\n0\r\n\r\n",
        "PUT / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n4 ;a\r\nabcd\r\n0\r\n\r\n",
        "PUT / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n4;a = b\r\nabcd\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n",
    ])
    func refused(_ text: String) {
        let error = Self.refusal(text)
        #expect(error?.kind == .malformed, "\(text.debugDescription) → \(String(describing: error))")
    }

    /// Framing errors, each with as few bytes as show it: the parser refuses them as they
    /// arrive, without waiting for a head or a body to end (a lenient parser would wait, and
    /// the client would get no answer until a timeout).
    static let framingErrors: [(String, String)] = [
        ("bare LF ends the request line", "GET / HTTP/1.1\n"),
        ("bare LF line endings throughout", "GET / HTTP/1.1\nHost: h\n\n"),
        ("bare LF before the request line", "\nGET / HTTP/1.1\r\n"),
        ("bare LF ends a field line", "GET / HTTP/1.1\r\nHost: h\nX-A: b"),
        ("bare CR in the request line", "GET / HTTP/1.1\rHost"),
        ("bare CR ends a field line", "GET / HTTP/1.1\r\nHost: h\rX"),
        ("NUL in the request line", "GET /\u{0}"),
        ("NUL in a field value", "GET / HTTP/1.1\r\nX-A: \u{0}"),
        ("a control character in a field value", "GET / HTTP/1.1\r\nX-A: \u{1B}"),
        ("a head over the limit", "GET / HTTP/1.1\r\nX-Long: " + String(repeating: "a", count: 300)),
        ("obsolete line folding", "GET / HTTP/1.1\r\nHost: h\r\nX-A: a\r\n b\r\n\r\n"),
        ("whitespace before the colon", "GET / HTTP/1.1\r\nHost: h\r\nX-A : a\r\n\r\n"),
        ("Content-Length and Transfer-Encoding", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"),
        ("two different Content-Lengths", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n"),
        ("a Content-Length that is not a number", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3a\r\n\r\n"),
        ("a transfer coding before chunked", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"),
        ("chunked twice", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"),
        // Found by the differential fuzz target: NIO's parser refuses an empty list element here.
        ("chunked with an empty element after it", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked,\r\n\r\n"),
        ("chunked with an empty element before it", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: , chunked\r\n\r\n"),
        ("a chunk size that is not hex, before its line ends", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz"),
        ("a negative chunk size", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n-1"),
        ("a chunk size too large, before its line ends", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n" + String(repeating: "f", count: 16)),
        ("a chunk size line ending in a bare LF", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n2\nab"),
        ("chunk data longer than its size", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX"),
        ("a trailer that is not a field", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nno colon here\r\n"),
        ("a folded trailer", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-A: a\r\n b\r\n"),
        ("no Host in HTTP/1.1", "GET / HTTP/1.1\r\n\r\n"),
        ("an unknown version", "GET / HTTP/1.2\r\nHost: h\r\n\r\n"),
        ("a method that is not a token", "G(T / HTTP/1.1\r\nHost: h\r\n\r\n"),
    ]

    @Test("every framing error is refused as soon as its bytes arrive, whole or one byte at a time",
          arguments: framingErrors)
    func refusedAtOnce(_ name: String, _ text: String) {
        for step in [0, 1] {
            do {
                let events = try Self.requestEvents(text, step: step, maxHead: 200)
                Issue.record("\(name): not refused (step \(step)), the parser waits for more: \(events)")
            } catch {
                #expect(!error.reason.isEmpty, "\(name)")
            }
        }
    }

    @Test("a header section over the limit or with too many fields is refused as too large")
    func headTooLarge() {
        let long = "GET / HTTP/1.1\r\nHost: h\r\nX-Long: \(String(repeating: "a", count: 300))\r\n\r\n"
        #expect(throws: HTTP1ParseError.self) { _ = try Self.requestEvents(long, maxHead: 200) }
        do {
            _ = try Self.requestEvents(String(long.prefix(250)), maxHead: 200)
            Issue.record("an unterminated head over the limit was not refused")
        } catch {
            #expect(error.kind == .headTooLarge)
        }
        let many = "GET / HTTP/1.1\r\nHost: h\r\n" + (0..<30).map { "X-\($0): v\r\n" }.joined() + "\r\n"
        #expect(Self.refusal(many)?.kind == .headTooLarge)
    }

    // MARK: Responses

    static func response(_ text: String, method: HTTPRequest.Method = .get, step: Int = 0, close: Bool = false,
                         maxBody: Int = 1 << 20) throws(HTTP1ParseError) -> HTTP1ResponseParser.Response? {
        var parser = HTTP1ResponseParser(maxBodySize: maxBody)
        let bytes = Array(text.utf8)
        let size = step == 0 ? max(bytes.count, 1) : step
        var offset = 0
        while offset < bytes.count {
            parser.append(ByteBuffer(bytes: bytes[offset..<min(offset + size, bytes.count)]))
            offset += size
            if let response = try parser.next(requestMethod: method) { return response }
        }
        return close ? try parser.endOfInput() : nil
    }

    @Test("response bodies by Content-Length, chunked, and until the close", arguments: [0, 1, 5])
    func responseFraming(step: Int) throws {
        let sized = try #require(try Self.response("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nETag: \"x\"\r\n\r\nhello", step: step))
        #expect(String(buffer: sized.response.body) == "hello" && sized.keepAlive)
        #expect(sized.response.headers[.eTag] == "\"x\"" && sized.response.headers[.contentLength] == nil)
        let chunked = try #require(try Self.response("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", step: step))
        #expect(String(buffer: chunked.response.body) == "abcde" && chunked.keepAlive)
        #expect(chunked.response.headers[.transferEncoding] == nil)
        let untilClose = try #require(try Self.response("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nto the end", step: step, close: true))
        #expect(String(buffer: untilClose.response.body) == "to the end" && !untilClose.keepAlive)
    }

    @Test("no body after HEAD, 204 and 304, whatever Content-Length says; interim 1xx answers are skipped")
    func bodiless() throws {
        let head = try #require(try Self.response("HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n", method: .head))
        #expect(head.response.body.readableBytes == 0 && head.keepAlive)
        let notModified = try #require(try Self.response("HTTP/1.1 304 Not Modified\r\nContent-Length: 7\r\n\r\n"))
        #expect(notModified.response.status == .notModified)
        let interim = try #require(try Self.response("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}"))
        #expect(interim.response.status == .created && String(buffer: interim.response.body) == "{}")
        #expect(throws: HTTP1ParseError.self) { _ = try Self.response("HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n") }
    }

    @Test("hop-by-hop fields and those Connection names are dropped; keep-alive follows version and Connection")
    func responseFields() throws {
        let response = try #require(try Self.response(
            "HTTP/1.1 200 OK\r\nConnection: X-Hop, close\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\nX-End: 2\r\nContent-Length: 0\r\n\r\n"))
        let names = response.response.headers.map(\.name.canonicalName)
        #expect(names == ["x-end"])
        #expect(!response.keepAlive)
        let old = try #require(try Self.response("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n"))
        #expect(!old.keepAlive)
        let oldKept = try #require(try Self.response("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n"))
        #expect(oldKept.keepAlive)
        let reason = try #require(try Self.response("HTTP/1.1 599 \r\nContent-Length: 0\r\n\r\n"))
        #expect(reason.response.status.code == 599)
    }

    /// The field lines a response's headers carry to the wire, if they carry any of their own.
    static func keptLines(_ response: ProxyResponse) -> FieldLines? {
        guard case .shared(let storage, _) = response.headers.wire else { return nil }
        var made = false
        let lines = storage.lines { fields in
            made = true
            return SerializedFields.lines(of: fields)
        }
        return made ? nil : lines
    }

    @Test("the kept field lines come along as they were sent, unless one would print differently")
    func responseLines() throws {
        let plain = try #require(try Self.response(
            "HTTP/1.1 200 OK\r\nServer: nginx\r\nDate: d\r\nContent-Length: 2\r\nConnection: keep-alive\r\nETag:  \"x\"\r\n\r\n{}"))
        let lines = try #require(Self.keptLines(plain.response))
        #expect(String(decoding: lines.bytes, as: UTF8.self) == "Server: nginx\r\nDate: d\r\nETag:  \"x\"\r\n")
        #expect(lines.count == plain.response.headers.count && lines.hasDate)
        let control = try #require(try Self.response("HTTP/1.1 200 OK\r\nX-Odd: a\u{1}b\r\nContent-Length: 0\r\n\r\n"))
        #expect(Self.keptLines(control.response) == nil && control.response.headers[HTTPField.Name("X-Odd")!] == "a b")
        let named = try #require(try Self.response("HTTP/1.1 200 OK\r\nConnection: X-Hop\r\nX-Hop: 1\r\nContent-Length: 0\r\n\r\n"))
        #expect(Self.keptLines(named.response) == nil && named.response.headers.isEmpty)
        let head = try #require(try Self.response("HTTP/1.1 200 OK\r\nContent-Length: 31\r\n\r\n", method: .head))
        #expect(head.response.headers[.contentLength] == "31" && Self.keptLines(head.response)?.declaredLength == "31")
    }

    @Test("a head read in one pass gives what the careful reader gives: lines after one that is not plain, framing noted once")
    func plainAndCarefulAgree() throws {
        // A hop-by-hop line that is not plain (a control character) after plain ones: the careful
        // reader reads the head again from nothing, and the lines kept are not doubled.
        let dropped = try #require(try Self.response(
            "HTTP/1.1 200 OK\r\nServer: a\r\nContent-Length: 2\r\nKeep-Alive: t\u{1}x\r\nETag: e\r\nConnection: keep-alive\r\nVary: v\r\n\r\n{}"))
        #expect(String(decoding: try #require(Self.keptLines(dropped.response)).bytes, as: UTF8.self) == "Server: a\r\nETag: e\r\nVary: v\r\n")
        #expect(dropped.response.headers.map(\.name.rawName) == ["Server", "ETag", "Vary"] && dropped.keepAlive)
        #expect(String(buffer: dropped.response.body) == "{}")
        // A kept line that is not plain: fields, as the careful reader makes them.
        let kept = try #require(try Self.response(
            "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nServer: s\r\nX-Odd: a\u{1}b\r\nX-End: 2\r\n\r\nabc"))
        #expect(Self.keptLines(kept.response) == nil && kept.keepAlive && String(buffer: kept.response.body) == "abc")
        #expect(kept.response.headers.map { "\($0.name.rawName)=\($0.value)" } == ["Server=s", "X-Odd=a b", "X-End=2"])
        let deleted = try #require(try Self.response("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nA: 1\r\nX-Del: a\u{7F}b\r\n\r\n"))
        #expect(Self.keptLines(deleted.response) == nil && deleted.response.headers.map(\.name.rawName) == ["A", "X-Del"])
        // Dropped lines first, in the middle and last; kept lines with obs-text, tabs and
        // trailing whitespace are plain and come as they were sent.
        let runs = try #require(try Self.response(
            "HTTP/1.1 200 OK\r\nTE: x\r\nA: 1\r\nB:\tcafé\t \r\nTransfer-Encoding: chunked\r\nC: 3\r\nUpgrade: u\r\n\r\n2\r\nok\r\n0\r\n\r\n"))
        #expect(String(decoding: try #require(Self.keptLines(runs.response)).bytes, as: UTF8.self) == "A: 1\r\nB:\tcafé\t \r\nC: 3\r\n")
        #expect(runs.response.headers[HTTPField.Name("B")!] == "café" && String(buffer: runs.response.body) == "ok")
        // The body that came with the head is taken at once; bytes beyond it stay unread.
        var parser = HTTP1ResponseParser(maxBodySize: 100)
        parser.append(ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}HTTP"))
        let first = try #require(try parser.next(requestMethod: .get))
        #expect(String(buffer: first.response.body) == "{}" && parser.hasUnreadBytes)
        // Refusals are the careful reader's, whichever line is at fault.
        for bad in ["A: 1\r\nBad Name: x", "A: 1\r\nX: a\u{0}b", "A: 1\r\n folded", "A: 1\r\n: empty", "Content-Length: 1\r\nA: 1\r\nContent-Length: 2"] {
            #expect(throws: HTTP1ParseError.self, "\(bad.debugDescription)") { _ = try Self.response("HTTP/1.1 200 OK\r\n\(bad)\r\n\r\n") }
        }
    }

    @Test("the one-pass reader's byte tests agree with the careful ones: token bytes by table, control bytes eight at a time")
    func byteTests() {
        for byte in UInt8.min...UInt8.max {
            #expect(HTTP1Syntax.isTokenByteByTable(byte) == HTTP1Syntax.isTokenByte(byte), "\(byte)")
        }
        func control(_ word: UInt64) -> Bool {
            (0..<8).contains { shift in
                let byte = UInt8(truncatingIfNeeded: word >> (8 * UInt64(shift)))
                return byte < 0x20 || byte == 0x7F
            }
        }
        // Every byte value at every place among plain bytes, then words of random bytes.
        let plain = UInt64(0x6162_6364_6566_6768)
        for place in 0..<8 {
            for byte in UInt8.min...UInt8.max {
                let word = plain & ~(0xFF << (8 * UInt64(place))) | UInt64(byte) << (8 * UInt64(place))
                #expect(HTTP1Syntax.hasControl(word) == control(word), "\(byte) at \(place)")
            }
        }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20000 {
            let word = generator.next() as UInt64
            #expect(HTTP1Syntax.hasControl(word) == control(word), "\(word)")
        }
    }

    @Test("a response's fields are kept as lines and made into fields only when asked for, as the fields would have been")
    func responseFieldsFromLines() throws {
        let text = "HTTP/1.1 200 OK\r\nserver: nginx\r\nDate: d\r\nContent-Length: 2\r\nKEEP-ALIVE: timeout=5\r\nX-Custom-Thing:  a, b \r\n"
            + "ETag: \"x\"\r\nTE: trailers\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n\r\n{}"
        let parsed = try #require(try Self.response(text)).response
        let lines = try #require(Self.keptLines(parsed))
        #expect(String(decoding: lines.bytes, as: UTF8.self) == "server: nginx\r\nDate: d\r\nX-Custom-Thing:  a, b \r\nETag: \"x\"\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n")
        #expect(lines.hasDate && lines.count == 6)
        let made = parsed.headers.map { "\($0.name.rawName)=\($0.value)" }
        #expect(made == ["server=nginx", "Date=d", "X-Custom-Thing=a, b", "ETag=\"x\"", "Set-Cookie=a=1", "Set-Cookie=b=2"])
        #expect(parsed.headers.contains(.server) && parsed.headers.contains(HTTPField.Name("x-custom-thing")!))
        #expect(!parsed.headers.contains(.contentLength) && !parsed.headers.contains(HTTPField.Name("Keep-Alive")!) && !parsed.headers.contains(.te))
        #expect(parsed.headers[.setCookie] == "a=1, b=2" && parsed.headers[.location] == nil)

        // Appending keeps the lines; any other change makes the fields once and drops them.
        var appended = parsed
        appended.headers.append(HTTPField(name: .age, value: "1"))
        #expect(Self.keptLines(appended) != nil && appended.headers.count == 7 && appended.headers[.age] == "1")
        var changed = parsed
        changed.headers[.server] = nil
        #expect(Self.keptLines(changed) == nil && changed.headers.map(\.name.rawName) == ["Date", "X-Custom-Thing", "ETag", "Set-Cookie", "Set-Cookie"])

        // Names are checked as strictly as when they become fields.
        for bad in ["Bad Name: x", "Bad\"Name: x", "B@d: x"] {
            #expect(throws: HTTP1ParseError.self, "\(bad)") { _ = try Self.response("HTTP/1.1 200 OK\r\n\(bad)\r\nContent-Length: 0\r\n\r\n") }
        }
    }

    @Test("headers kept as lines read as the fields they stand for, with appended fields, names in both parts, in any case")
    func linesAgreeWithFields() throws {
        let text = "HTTP/1.1 200 OK\r\nx-a: 1\r\nDate: d\r\nContent-Length: 2\r\nX-A:  2 \r\nCookie: c=1\r\nCOOKIE: d=2\r\nVary: accept\r\n\r\n{}"
        var headers = try #require(try Self.response(text)).response.headers
        #expect(Self.keptLines(ProxyResponse(status: .ok, headers: headers)) != nil)
        headers.append(HTTPField(name: HTTPField.Name("X-A")!, value: "3"))
        headers.append(HTTPField(name: .age, value: "0"))
        headers.append(HTTPField(name: .cookie, value: "e=3"))
        // What one HTTPFields made of the same fields says, for every reading.
        var expected = HTTPFields()
        for (name, value) in [("x-a", "1"), ("Date", "d"), ("X-A", "2"), ("Cookie", "c=1"), ("COOKIE", "d=2"), ("Vary", "accept"),
                              ("X-A", "3"), ("Age", "0"), ("Cookie", "e=3")] {
            expected.append(HTTPField(name: HTTPField.Name(name)!, value: value))
        }
        #expect(headers.fields == expected && Array(headers) == Array(expected) && headers.count == expected.count)
        let names = ["x-a", "X-A", "date", "cookie", "vary", "age", "content-length", "etag", "x-b", "a", "connection"].map { HTTPField.Name($0)! }
        for name in names {
            #expect(headers[name] == expected[name], "\(name)")
            #expect(headers[values: name] == expected[values: name], "\(name)")
            #expect(headers.contains(name) == expected.contains(name), "\(name)")
        }
        #expect(headers[HTTPField.Name("x-a")!] == "1, 2, 3" && headers[.cookie] == "c=1; d=2; e=3")
        // Removing a name found in both parts removes it from both.
        headers[HTTPField.Name("X-A")!] = nil
        expected[HTTPField.Name("X-A")!] = nil
        #expect(headers.fields == expected && !headers.contains(HTTPField.Name("x-a")!))
    }

    @Test("hop-by-hop names are recognized on the wire in any case, as HopByHop.isRemoved recognizes them")
    func hopByHopBytes() {
        for name in HopByHop.alwaysRemoved + ["content-length", "host", "te-x", "upgrades", "connections", "x-connection", "date"] {
            for spelled in [name, name.uppercased()] {
                let found = Array(spelled.utf8).withUnsafeBytes { HopByHop.isRemoved($0) }
                #expect(found == HopByHop.isRemoved(name), "\(spelled)")
            }
        }
    }

    @Test("malformed, oversized and cut-off responses are errors")
    func responseErrors() {
        for text in ["HTTP/2 200 OK\r\n\r\n", "HTTP/1.1 20 OK\r\n\r\n", "HTTP/1.1 200OK\r\n\r\n", "NOT HTTP\r\n\r\n",
                     "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"] {
            #expect(throws: HTTP1ParseError.self, "\(text.debugDescription)") { _ = try Self.response(text) }
        }
        do {
            _ = try Self.response("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", maxBody: 10)
            Issue.record("an oversized body was accepted")
        } catch {
            #expect(error.kind == .bodyTooLarge)
        }
        #expect(throws: HTTP1ParseError.self) { _ = try Self.response("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", close: true) }
    }
}
