import HTTPTypes
import NIOCore
import Testing
import VeneerCore
@testable import VeneerOrigins

/// A streamed response body on one upstream connection, event by event, without a socket:
/// its head, its parts as they come, its end, and the ways it is cut (the client leaves, the
/// upstream fails or pauses too long), after which the connection is never reused.
@Suite("Upstream connection state machine: streamed bodies")
struct UpstreamConnectionStreamingTests {
    typealias Machine = UpstreamConnectionStateMachine

    /// An idle connection that has sent a GET whose answer streams past `threshold` bytes.
    func sent(threshold: Int = 4) -> Machine {
        var machine = Machine()
        machine.connected()
        #expect(machine.startRequest(.get, maxResponseBodySize: 8, streamThreshold: threshold, channelIsActive: true).summary == "write")
        return machine
    }

    /// Every action the bytes give, asking for the next after a head or a part.
    func events(_ machine: inout Machine, _ text: String) -> [String] {
        var actions = [machine.read(ByteBuffer(string: text))]
        while true {
            switch actions.last! {
            case .streamHead, .streamPart: actions.append(machine.parseNext())
            default: return actions.map(\.summary).filter { $0 != "none" }
            }
        }
    }

    @Test("a body over the threshold streams: head, parts as they come, end; the connection is reused")
    func lengthOverThreshold() {
        var machine = sent()
        #expect(events(&machine, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123") == ["head 200 10", "part 0123"])
        #expect(machine.state == .streamingBody)
        #expect(events(&machine, "456") == ["part 456"])
        #expect(events(&machine, "789") == ["part 789", "end keepAlive"])
        #expect(machine.state == .idle)
    }

    @Test("a body up to the threshold is read whole, as before; larger than max_body would be, it still streams")
    func smallIsWhole() {
        var machine = sent()
        #expect(events(&machine, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nabcd") == ["deliver 200 abcd keepAlive"])
        var large = sent(threshold: 4)
        #expect(events(&large, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")  == ["head 200 1000"])
    }

    @Test("limits.buffered: a body read whole reserves its length when its head arrives and the answer holds it; with no room it streams")
    func wholeReserves() {
        let budget = BufferBudget(limit: 6)
        var machine = Machine()
        machine.connected()
        _ = machine.startRequest(.get, maxResponseBodySize: 8, streamThreshold: 4, budget: budget, channelIsActive: true)
        #expect(machine.read(ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nab")).summary == "none")
        #expect(budget.inUse == 4, "reserved with the head, before the body is read")
        guard case .deliver(var answer, _) = machine.read(ByteBuffer(string: "cd")) else {
            Issue.record("a whole answer")
            return
        }
        #expect(answer.reservation?.held == 4 && budget.inUse == 4)
        _ = machine.startRequest(.get, maxResponseBodySize: 8, streamThreshold: 4, budget: budget, channelIsActive: true)
        #expect(events(&machine, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nabcd") == ["head 200 4", "part abcd", "end keepAlive"],
                "no room for it beside the first: it streams (a few buffers, not its length)")
        answer = ProxyResponse(status: .ok)
        #expect(budget.inUse == 0, "the answer gone, its share is given back")
        _ = answer
    }

    @Test("a chunked body streams chunk by chunk, whatever its size; trailers end it")
    func chunked() {
        var machine = sent(threshold: 1 << 20)
        #expect(events(&machine, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\ndata:\r\n") == ["head 200 unknown", "part data:"])
        #expect(events(&machine, "3\r\n 1\n\r") == ["part  1\n"])
        #expect(events(&machine, "\n0\r\n\r\n") == ["end keepAlive"])
        #expect(machine.state == .idle)
    }

    @Test("a close-delimited body streams until the close, which ends it whole")
    func untilClose() {
        var machine = sent()
        #expect(events(&machine, "HTTP/1.1 200 OK\r\n\r\nevent: a\n\n") == ["head 200 unknown", "part event: a\n\n"])
        #expect(machine.channelInactive().summary == "end close")
        #expect(machine.state == .closed)
    }

    @Test("the upstream closes mid-body: the stream fails (the client's connection will close)")
    func closedMidBody() {
        var machine = sent()
        _ = events(&machine, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123")
        #expect(machine.channelInactive().summary == "failed closedMidResponse")
        var chunked = sent()
        _ = events(&chunked, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab")
        #expect(chunked.channelInactive().summary == "failed closedMidResponse")
    }

    @Test("the upstream resets mid-body, or sends a bad chunk: the stream fails and the connection closes")
    func failedMidBody() {
        var machine = sent()
        _ = events(&machine, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123")
        #expect(machine.errorCaught().summary == "failed failedMidResponse")
        #expect(machine.state == .closing)
        #expect(machine.channelInactive().summary == "none", "reported once")
        var chunked = sent()
        #expect(events(&chunked, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").last?.hasPrefix("failed malformed") == true)
        #expect(chunked.state == .closing)
    }

    @Test("the client leaves mid-body: the connection closes with the rest on it, never back to the pool")
    func cancelled() {
        var machine = sent()
        _ = events(&machine, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123")
        #expect(machine.bodyCancelled().summary == "close")
        #expect(machine.state == .closing)
        #expect(events(&machine, "456789") == [], "what still arrives is dropped")
        #expect(machine.channelInactive().summary == "none")
        #expect(machine.bodyCancelled().summary == "none", "once")
    }

    @Test("the upstream pauses longer than body_timeout while a part is wanted: the stream fails")
    func pause() {
        var machine = sent()
        _ = events(&machine, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        #expect(machine.bodyPauseTimedOut().summary == "failed timedOut")
        #expect(machine.state == .closing)
        var idle = Machine()
        idle.connected()
        #expect(idle.bodyPauseTimedOut().summary == "none", "only a streamed body has pauses")
    }

    @Test("the pool gives up on the connection mid-body (shutdown): the stream hears it")
    func closedByPool() {
        var machine = sent()
        _ = events(&machine, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n")
        #expect(machine.close().summary == "failed shuttingDown")
    }

    @Test("bytes after a streamed body's end: the connection is not reused")
    func bytesAfterEnd() {
        var machine = sent()
        #expect(events(&machine, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n01234HTTP") == ["head 200 5", "part 01234", "end close"])
        #expect(machine.state == .closing)
    }

    @Test("without a threshold nothing streams: a chunked body is read whole, up to max_body")
    func noThreshold() {
        var machine = Machine()
        machine.connected()
        _ = machine.startRequest(.get, maxResponseBodySize: 8, channelIsActive: true)
        #expect(events(&machine, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n") == ["deliver 200 ab keepAlive"])
    }
}
