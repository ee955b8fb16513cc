import HTTPTypes
import NIOCore
import Testing
@testable import VeneerOrigins

/// One upstream connection, event by event, without a socket: what the handler is told to do
/// for each thing the wire does, including what must not happen in a state.
@Suite("Upstream connection state machine")
struct UpstreamConnectionStateMachineTests {
    typealias Machine = UpstreamConnectionStateMachine

    /// A connection that is established and idle.
    func idle() -> Machine {
        var machine = Machine()
        machine.connected()
        return machine
    }

    /// An idle connection that has sent a `method` request.
    func sent(_ method: HTTPRequest.Method = .get, maxBody: Int = 1 << 20) -> Machine {
        var machine = idle()
        #expect(machine.startRequest(method, maxResponseBodySize: maxBody, channelIsActive: true).summary == "write")
        return machine
    }

    func bytes(_ text: String) -> ByteBuffer { ByteBuffer(string: text) }

    static let ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"

    @Test("a request, its response, and the connection is idle for the next one")
    func exchange() {
        var machine = Machine()
        #expect(machine.state == .connecting)
        machine.connected()
        #expect(machine.state == .idle)
        #expect(machine.startRequest(.get, maxResponseBodySize: 100, channelIsActive: true).summary == "write")
        #expect(machine.state == .awaitingResponse(.get))
        #expect(machine.read(bytes(Self.ok)).summary == "deliver 200 {} keepAlive")
        #expect(machine.state == .idle)
        #expect(machine.startRequest(.post, maxResponseBodySize: 100, channelIsActive: true).summary == "write")
        #expect(machine.read(bytes("HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n")).summary == "deliver 201  keepAlive")
    }

    @Test("a response in pieces: the first byte moves it to receiving, the last delivers it")
    func pieces() {
        var machine = sent()
        #expect(machine.read(bytes("HTTP/1.1 200 OK\r\nContent-")).summary == "none")
        #expect(machine.state == .receivingResponse(.get))
        #expect(machine.read(bytes("Length: 2\r\n\r\n{")).summary == "none")
        #expect(machine.read(bytes("}")).summary == "deliver 200 {} keepAlive")
    }

    @Test("closed before a byte of the response: reported so that the pool may retry")
    func closedBeforeResponse() {
        var machine = sent()
        #expect(machine.channelInactive().summary == "closedBeforeResponse")
        #expect(machine.state == .closed)
        #expect(machine.channelInactive().summary == "none", "reported once")
    }

    @Test("closed mid-response: the request fails, it is not retried")
    func closedMidResponse() {
        var machine = sent()
        #expect(machine.read(bytes("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{\"cut")).summary == "none")
        #expect(machine.channelInactive().summary == "fail closedMidResponse")
    }

    @Test("a body that runs until the close is delivered when the channel closes, not reused")
    func untilClose() {
        var machine = sent()
        #expect(machine.read(bytes("HTTP/1.1 200 OK\r\n\r\nuntil ")).summary == "none")
        #expect(machine.read(bytes("the end")).summary == "none")
        #expect(machine.inputClosed().summary == "close", "the half-close ends the body: close to learn it")
        #expect(machine.channelInactive().summary == "deliver 200 until the end close")
    }

    @Test("bytes while idle (a peer talking out of turn) close the connection, and nothing is reported")
    func outOfTurn() {
        var machine = idle()
        #expect(machine.read(bytes(Self.ok)).summary == "close")
        #expect(machine.state == .closing)
        #expect(machine.read(bytes(Self.ok)).summary == "none", "dropped")
        #expect(machine.startRequest(.get, maxResponseBodySize: 100, channelIsActive: true).summary == "notSent")
        #expect(machine.channelInactive().summary == "none")
    }

    @Test("bytes before the connection is handed over are out of turn too")
    func bytesWhileConnecting() {
        var machine = Machine()
        #expect(machine.read(bytes("HTTP/1.1 200 OK\r\n")).summary == "close")
        machine.connected()
        #expect(machine.state == .closing, "a late connected() does not revive it")
    }

    @Test("bytes beyond the response make the connection non-reusable")
    func extraBytes() {
        var machine = sent()
        #expect(machine.read(bytes(Self.ok + "HTTP/1.1 200 OK\r\n")).summary == "deliver 200 {} close")
        #expect(machine.state == .closing)
        #expect(machine.startRequest(.get, maxResponseBodySize: 100, channelIsActive: true).summary == "notSent")
    }

    @Test("Connection: close and HTTP/1.0 answers are not reused", arguments: [
        "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}",
        "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}",
    ])
    func notKeptAlive(response: String) {
        var machine = sent()
        #expect(machine.read(bytes(response)).summary == "deliver 200 {} close")
        #expect(machine.channelInactive().summary == "none", "already delivered")
    }

    @Test("a HEAD answer has no body even with a Content-Length, and the connection goes on")
    func head() {
        var machine = sent(.head)
        #expect(machine.read(bytes("HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n")).summary == "deliver 200  keepAlive")
        #expect(machine.state == .idle)
    }

    @Test("a malformed response fails the request and closes; what follows is dropped")
    func malformed() {
        var machine = sent()
        let action = machine.read(bytes("NOT HTTP AT ALL\r\n\r\n"))
        #expect(action.summary.hasPrefix("fail malformed("))
        #expect(machine.state == .closing)
        #expect(machine.read(bytes(Self.ok)).summary == "none")
        #expect(machine.channelInactive().summary == "none", "one outcome per request")
    }

    @Test("a response over the size limit fails as too large")
    func tooLarge() {
        var machine = sent(maxBody: 10)
        #expect(machine.read(bytes("HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n")).summary
            == #"fail tooLarge("The upstream response is larger than 10 bytes.")"#)
    }

    @Test("an error before the response may be retried; during it, it fails; while idle, it only closes")
    func errors() {
        var before = sent()
        #expect(before.errorCaught().summary == "closedBeforeResponse")
        #expect(before.channelInactive().summary == "none", "reported once")

        var during = sent()
        _ = during.read(bytes("HTTP/1.1 200 OK\r\n"))
        #expect(during.errorCaught().summary == "fail failedMidResponse")
        #expect(during.channelInactive().summary == "none")

        var idle = idle()
        #expect(idle.errorCaught().summary == "close")
        #expect(idle.channelInactive().summary == "none")
    }

    @Test("the pool gives up (a timeout, a cancel): the connection closes and a late response is not delivered")
    func givenUp() {
        var machine = sent()
        #expect(machine.close().summary == "close")
        #expect(machine.close().summary == "none", "closing already")
        #expect(machine.read(bytes(Self.ok)).summary == "none", "a response after the timeout is dropped")
        #expect(machine.channelInactive().summary == "none")
        #expect(machine.close().summary == "none", "closed already")
    }

    @Test("a second completion cannot happen: after the answer, a close reports nothing")
    func secondCompletion() {
        var machine = sent()
        #expect(machine.read(bytes(Self.ok)).summary == "deliver 200 {} keepAlive")
        #expect(machine.channelInactive().summary == "none")
        #expect(machine.read(bytes(Self.ok)).summary == "none")
    }

    @Test("a request on a connection that closed meanwhile is not sent")
    func notSent() {
        var machine = idle()
        #expect(machine.startRequest(.get, maxResponseBodySize: 100, channelIsActive: false).summary == "notSent")
        #expect(machine.state == .closing)
        var closed = idle()
        _ = closed.channelInactive()
        #expect(closed.startRequest(.get, maxResponseBodySize: 100, channelIsActive: true).summary == "notSent")
    }

    @Test("the exchange is given up (its streamed request body was cut): fail before the answer, cut the answer's stream after its head; the connection closes")
    func abandon() {
        var machine = sent(.put)
        #expect(machine.abandon(.requestBodyCut).summary == "fail requestBodyCut")
        #expect(machine.state == .closing)
        #expect(machine.read(bytes(Self.ok)).summary == "none", "a late answer is dropped")
        #expect(machine.startRequest(.get, maxResponseBodySize: 100, channelIsActive: true).summary == "notSent")
        #expect(machine.channelInactive().summary == "none", "reported once")
        var streaming = idle()
        _ = streaming.startRequest(.post, maxResponseBodySize: 100, streamThreshold: 4, channelIsActive: true)
        #expect(streaming.read(bytes("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n")).summary == "head 200 10")
        #expect(streaming.abandon(.requestBodyCut).summary == "failed requestBodyCut")
        #expect(streaming.state == .closing)
        var answered = idle()
        #expect(answered.abandon(.requestBodyCut).summary == "none", "nothing under way")
    }

    @Test("closed before a byte of the answer: reported as such, whatever the request's body (its exchange says whether it may be retried)")
    func closedBeforeAnswer() {
        var machine = sent(.put)
        #expect(machine.channelInactive().summary == "closedBeforeResponse")
        var reset = sent(.put)
        #expect(reset.errorCaught().summary == "closedBeforeResponse")
    }
}

extension UpstreamConnectionStateMachine.Action {
    /// The action in words, for comparing.
    var summary: String {
        switch self {
        case .none: "none"
        case .write: "write"
        case .notSent: "notSent"
        case .deliver(let response, let keepAlive):
            "deliver \(response.status.code) \(String(buffer: response.body)) \(keepAlive ? "keepAlive" : "close")"
        case .fail(let failure): "fail \(failure)"
        case .closedBeforeResponse: "closedBeforeResponse"
        case .close: "close"
        case .streamHead(let head, let length): "head \(head.status.code) \(length.map(String.init) ?? "unknown")"
        case .streamPart(let part): "part \(String(buffer: part))"
        case .streamEnd(let keepAlive): "end \(keepAlive ? "keepAlive" : "close")"
        case .streamFailed(let failure): "failed \(failure)"
        }
    }
}
