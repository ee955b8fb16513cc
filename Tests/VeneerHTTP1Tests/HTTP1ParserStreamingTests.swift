import NIOCore
import Testing
import VeneerCore
@testable import VeneerHTTP1

/// The request parser with bodies that stream (``HTTP1RequestParser/streamsBody``) and with
/// chunked bodies read whole against the buffer budget.
@Suite("HTTP/1.1 request parser: streamed bodies and chunked bodies against the budget")
struct HTTP1ParserStreamingTests {
    /// Every event `parser` gives now, as text.
    static func events(_ parser: inout HTTP1RequestParser) throws -> [String] {
        var seen: [String] = []
        while let event = try parser.next() { seen.append(describe(event)) }
        return seen
    }

    /// The next event as text ("none" when there is none yet).
    static func next(_ parser: inout HTTP1RequestParser) throws -> String {
        try parser.next().map(describe) ?? "none"
    }

    static func describe(_ event: HTTP1RequestParser.Event) -> String {
        switch event {
        case .bodyStreams(let head, let length): return "streams \(head.target) \(length.map(String.init) ?? "chunked")"
        case .bodyPart(let part): return "part " + String(buffer: part)
        case .bodyEnd: return "end"
        case .request(let head, let body): return "request \(head.target) \(String(buffer: body))"
        case .waitingForBody: return "continue"
        case .tooLarge: return "tooLarge"
        case .overBudget: return "overBudget"
        }
    }

    static func streaming(bodyLimit: Int = 4) -> HTTP1RequestParser {
        var parser = HTTP1RequestParser(maxHeadSize: 8192, bodyLimit: bodyLimit)
        parser.streamsBody = { $0.target.hasPrefix("/uploads") }
        return parser
    }

    @Test("a body with a Content-Length streams as its bytes arrive, past request_body, then the next request is read")
    func declaredLength() throws {
        var parser = Self.streaming()
        parser.append(ByteBuffer(string: "PUT /uploads/1 HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n1234"))
        #expect(try Self.events(&parser) == ["streams /uploads/1 10", "part 1234"])
        #expect(parser.progress == .body)
        #expect(!parser.atStreamedBodyEnd)
        parser.append(ByteBuffer(string: "567890GET /posts/1 HTTP/1.1\r\nHost: a\r\n\r\n"))
        #expect(try Self.next(&parser) == "part 567890")
        #expect(parser.atStreamedBodyEnd, "its end is known without more input")
        #expect(try Self.events(&parser) == ["end", "request /posts/1 "])
    }

    @Test("a chunked body streams without its framing")
    func chunked() throws {
        var parser = Self.streaming()
        parser.append(ByteBuffer(string: "POST /uploads HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3"))
        #expect(try Self.events(&parser) == ["streams /uploads chunked", "part hello"])
        parser.append(ByteBuffer(string: "\r\nabc\r\n0\r\n\r\n"))
        #expect(try Self.events(&parser) == ["part abc", "end"])
        #expect(parser.isBetweenRequests)
    }

    @Test("a bad chunk size in a streamed body is refused")
    func badChunk() throws {
        var parser = Self.streaming()
        parser.append(ByteBuffer(string: "POST /uploads HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"))
        #expect(try Self.next(&parser) == "streams /uploads chunked")
        var refused = false
        do { _ = try parser.next() } catch { refused = true }
        #expect(refused)
    }

    @Test("a body the predicate does not stream is read whole, as before; without a body nothing streams")
    func wholeOtherwise() throws {
        var parser = Self.streaming(bodyLimit: 100)
        parser.append(ByteBuffer(string: "POST /posts HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabcPUT /uploads/1 HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n"))
        #expect(try Self.events(&parser) == ["request /posts abc", "request /uploads/1 "])
    }

    @Test("a chunked body read whole takes its share of the budget as it arrives; beyond it, overBudget and the parser stops")
    func chunkedBudget() throws {
        let budget = BufferBudget(limit: 10)
        var parser = HTTP1RequestParser(maxHeadSize: 8192, bodyLimit: 1 << 20)
        parser.budget = budget
        parser.append(ByteBuffer(string: "POST /posts HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nabcdef\r\n"))
        #expect(try parser.next() == nil)
        #expect(budget.inUse == 6, "reserved as it arrived")
        parser.append(ByteBuffer(string: "2\r\ngh\r\n0\r\n\r\n"))
        guard case .request(_, let body)? = try parser.next() else {
            Issue.record("no request")
            return
        }
        #expect(body.readableBytes == 8)
        var reservation = parser.takeReservation()
        #expect(reservation?.held == 8)
        reservation = nil
        _ = reservation
        #expect(budget.inUse == 0)

        parser.append(ByteBuffer(string: "POST /posts HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n8\r\nabcdefgh\r\n4\r\nijkl\r\n"))
        guard case .overBudget? = try parser.next() else {
            Issue.record("not refused")
            return
        }
        #expect(try parser.next() == nil, "the parser stopped")
        parser.stop()
        #expect(budget.inUse == 0, "what it held went back")
    }
}
