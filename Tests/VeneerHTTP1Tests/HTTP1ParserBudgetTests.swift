import NIOCore
import Testing
import VeneerCore
@testable import VeneerHTTP1

/// The request parser with a buffer budget (`limits.buffered`): a declared body is reserved
/// before it is read; one that does not fit is refused unread.
@Suite("HTTP/1.1 request parser: buffer budget")
struct HTTP1ParserBudgetTests {
    @Test("a declared body is reserved before it is read, and the reservation goes with the request")
    func reserved() throws {
        let budget = BufferBudget(limit: 10)
        var parser = HTTP1RequestParser(maxHeadSize: 8192, bodyLimit: 1 << 20)
        parser.budget = budget
        parser.append(ByteBuffer(string: "POST /posts HTTP/1.1\r\nHost: a\r\nContent-Length: 8\r\n\r\n1234"))
        #expect(try parser.next() == nil)
        #expect(budget.inUse == 8, "reserved when the head was read")
        parser.append(ByteBuffer(string: "5678"))
        guard case .request(_, let body)? = try parser.next() else {
            Issue.record("no request")
            return
        }
        #expect(body.readableBytes == 8)
        var reservation = parser.takeReservation()
        #expect(reservation?.held == 8)
        reservation = nil
        #expect(budget.inUse == 0)
        _ = reservation
    }

    @Test("a declared body the budget has no room for is refused unread: overBudget, and the parser stops")
    func overBudget() throws {
        let budget = BufferBudget(limit: 10)
        let held = budget.reserve(5)
        var parser = HTTP1RequestParser(maxHeadSize: 8192, bodyLimit: 1 << 20)
        parser.budget = budget
        parser.append(ByteBuffer(string: "POST /posts HTTP/1.1\r\nHost: a\r\nContent-Length: 8\r\n\r\n1234"))
        guard case .overBudget(let head)? = try parser.next() else {
            Issue.record("not refused")
            return
        }
        #expect(head.target == "/posts" && budget.inUse == 5 && held != nil)
        #expect(try parser.next() == nil)
    }

    @Test("a parser that stops mid-body gives its reservation back")
    func stopped() throws {
        let budget = BufferBudget(limit: 10)
        var parser = HTTP1RequestParser(maxHeadSize: 8192, bodyLimit: 1 << 20)
        parser.budget = budget
        parser.append(ByteBuffer(string: "PUT /posts/1 HTTP/1.1\r\nHost: a\r\nContent-Length: 8\r\n\r\n12"))
        _ = try parser.next()
        #expect(budget.inUse == 8)
        parser.stop()
        #expect(budget.inUse == 0)
    }
}
