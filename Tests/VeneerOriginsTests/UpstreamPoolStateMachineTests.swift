import NIOCore
import Testing
@testable import VeneerOrigins

/// A loop's pool, event by event, without a socket: connections are names ("c0"), requests
/// small objects, time the deadlines given. Each test compares the actions the pool asks for,
/// in the order it performs them (timer, connection, request).
@Suite("Upstream pool state machine")
struct UpstreamPoolStateMachineTests {
    final class Request: CustomStringConvertible {
        let name: String
        init(_ name: String) { self.name = name }
        var description: String { name }
    }

    typealias Machine = UpstreamPoolStateMachine<Request, String>
    typealias ID = Machine.ConnectionID

    static let host = "127.0.0.1"
    static let port = 8080
    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    func id(_ index: Int, _ generation: UInt32 = 0) -> ID { ID(index: index, generation: generation) }

    /// `request` for the one peer, due `seconds` after ``start``.
    func execute(_ machine: inout Machine, _ request: Request, due seconds: Int64 = 10, retryable: Bool = true) -> String {
        machine.execute(request, host: Self.host, port: Self.port, deadline: Self.start + .seconds(seconds), retryable: retryable).summary
    }

    /// A pool whose connection "c0" (slot 0) is idle after answering one request.
    func withIdleConnection(limit: Int = 4) -> Machine {
        var machine = Machine(limit: limit, idleTicksBeforeClose: 2)
        _ = execute(&machine, Request("warm-up"))
        _ = machine.connectionEstablished(id(0), "c0")
        _ = machine.responseReceived(on: id(0), keepAlive: true)
        return machine
    }

    /// A pool with two idle connections: c0 (slot 0) and c1 (slot 1), c1 used last.
    func withTwoIdleConnections() -> Machine {
        var machine = Machine(limit: 4, idleTicksBeforeClose: 2)
        _ = execute(&machine, Request("a"))
        _ = execute(&machine, Request("b"))
        _ = machine.connectionEstablished(id(0), "c0")
        _ = machine.connectionEstablished(id(1), "c1")
        _ = machine.responseReceived(on: id(0), keepAlive: true)
        _ = machine.responseReceived(on: id(1), keepAlive: true)
        return machine
    }

    func counts(_ machine: Machine, port: Int = Self.port) -> String {
        let counts = machine.counts(host: Self.host, port: port)
        return "open \(counts.open) idle \(counts.idle) waiting \(counts.waiting)" + (counts.backingOff > 0 ? " backingOff \(counts.backingOff)" : "")
    }

    @Test("a first request opens a connection and runs on it; answered, it idles and the next request reuses it")
    func keepAlive() {
        var machine = Machine(limit: 4, idleTicksBeforeClose: 2)
        let first = Request("r1"), second = Request("r2")
        #expect(execute(&machine, first) == "startDeadlineSweep, create #0.0 127.0.0.1:8080")
        #expect(machine.connectionEstablished(id(0), "c0").summary == "startIdleSweep, run r1 on c0")
        #expect(machine.responseReceived(on: id(0), keepAlive: true).summary == "succeed r1")
        #expect(counts(machine) == "open 1 idle 1 waiting 0")
        #expect(execute(&machine, second) == "run r2 on c0", "no new connection, and the sweep already ticks")
        #expect(machine.responseReceived(on: id(0), keepAlive: true).summary == "succeed r2")
    }

    @Test("beyond the limit requests wait; a connection set free takes the first waiting one before its caller hears")
    func limit() {
        var machine = Machine(limit: 1, idleTicksBeforeClose: 2)
        let (r1, r2, r3) = (Request("r1"), Request("r2"), Request("r3"))
        #expect(execute(&machine, r1) == "startDeadlineSweep, create #0.0 127.0.0.1:8080")
        #expect(execute(&machine, r2) == "")
        #expect(execute(&machine, r3) == "")
        #expect(counts(machine) == "open 1 idle 0 waiting 2")
        #expect(machine.connectionEstablished(id(0), "c0").summary == "startIdleSweep, run r1 on c0")
        #expect(machine.responseReceived(on: id(0), keepAlive: true).summary == "run r2 on c0, succeed r1")
        #expect(machine.responseReceived(on: id(0), keepAlive: true).summary == "run r3 on c0, succeed r2")
        #expect(machine.responseReceived(on: id(0), keepAlive: true).summary == "succeed r3")
        #expect(counts(machine) == "open 1 idle 1 waiting 0")
    }

    @Test("a connection that is not kept alive makes room, once closed, for a waiting request's own")
    func notKeptAlive() {
        var machine = Machine(limit: 1, idleTicksBeforeClose: 2)
        let (r1, r2) = (Request("r1"), Request("r2"))
        _ = execute(&machine, r1)
        _ = execute(&machine, r2)
        _ = machine.connectionEstablished(id(0), "c0")
        #expect(machine.responseReceived(on: id(0), keepAlive: false).summary == "succeed r1")
        #expect(counts(machine) == "open 1 idle 0 waiting 1", "a closing connection still counts")
        #expect(machine.connectionClosed(id(0)).summary == "create #0.1 127.0.0.1:8080", "the slot again, its next generation")
        #expect(machine.connectionEstablished(id(0, 1), "c1").summary == "run r2 on c1")
    }

    @Test("an idempotent request whose reused connection closed before any answer is retried once, then fails")
    func retryOnce() {
        var machine = withTwoIdleConnections()
        let get = Request("get")
        #expect(execute(&machine, get) == "run get on c1")
        #expect(machine.closedBeforeResponse(on: id(1), requestSent: true).summary == "run get on c0", "retried on the other")
        #expect(machine.closedBeforeResponse(on: id(0), requestSent: true).summary == "fail get closedWithoutAnswer", "once only")
    }

    @Test("a retry says so (for veneer_upstream_retries_total); a failure, a first send and a stale event do not")
    func retryIsMarked() {
        var machine = withTwoIdleConnections()
        let get = Request("get")
        _ = execute(&machine, get)
        #expect(!machine.closedBeforeResponse(on: id(5), requestSent: true).retried, "not a connection of the pool")
        #expect(machine.closedBeforeResponse(on: id(1), requestSent: true).retried)
        #expect(!machine.closedBeforeResponse(on: id(0), requestSent: true).retried, "failed, not sent again")
        var fresh = withIdleConnection()
        #expect(!fresh.execute(Request("other"), host: "127.0.0.1", port: 8080, deadline: .now() + .seconds(5), retryable: true).retried)
    }

    @Test("a retry with no idle connection opens a new one, and a fresh connection's close is not retried")
    func retryOnNewConnection() {
        var machine = withIdleConnection()
        let get = Request("get")
        #expect(execute(&machine, get) == "run get on c0")
        #expect(machine.closedBeforeResponse(on: id(0), requestSent: true).summary == "create #1.0 127.0.0.1:8080")
        #expect(machine.connectionEstablished(id(1), "c1").summary == "run get on c1")
        #expect(machine.closedBeforeResponse(on: id(1), requestSent: true).summary == "fail get closedWithoutAnswer")
    }

    @Test("a request that is not idempotent is never sent twice")
    func noRetryForPost() {
        var machine = withIdleConnection()
        let post = Request("post")
        #expect(execute(&machine, post, retryable: false) == "run post on c0")
        #expect(machine.closedBeforeResponse(on: id(0), requestSent: true).summary == "fail post closedWithoutAnswer")
    }

    @Test("a request that never went out (its idle connection had closed) goes again, whatever its method, keeping its retry")
    func notSent() {
        var machine = withIdleConnection()
        let post = Request("post")
        #expect(execute(&machine, post, retryable: false) == "run post on c0")
        #expect(machine.closedBeforeResponse(on: id(0), requestSent: false).summary == "create #1.0 127.0.0.1:8080")
        #expect(machine.connectionEstablished(id(1), "c1").summary == "run post on c1")


        // The same request, not sent on one reused connection, then sent on another that closes: still retried.
        var other = withTwoIdleConnections()
        let get = Request("get")
        #expect(execute(&other, get) == "run get on c1")
        #expect(other.closedBeforeResponse(on: id(1), requestSent: false).summary == "run get on c0")
        #expect(other.closedBeforeResponse(on: id(0), requestSent: true).summary == "create #2.0 127.0.0.1:8080",
                "an unsent attempt does not use up the retry")
    }

    @Test("a failed connect fails its request (timeout or unreachable) and holds its room until its backoff ends; then a waiting request opens its own")
    func connectFailure() {
        var machine = Machine(limit: 1, idleTicksBeforeClose: 2)
        let (r1, r2) = (Request("r1"), Request("r2"))
        _ = execute(&machine, r1)
        _ = execute(&machine, r2)
        // Not straight to r2's connection: the upstream just failed one.
        #expect(machine.connectionFailed(id(0), timedOut: true).summary == "backOff #0.0 100ms, fail r1 connectTimedOut unsent")
        #expect(counts(machine) == "open 1 idle 0 waiting 1 backingOff 1")
        #expect(machine.connectionFailed(id(0), timedOut: false).summary == "", "reported twice: nothing")
        #expect(machine.backoffEnded(id(0)).summary == "create #0.1 127.0.0.1:8080")
        #expect(machine.connectionFailed(id(0, 1), timedOut: false).summary == "backOff #0.1 125ms, fail r2 unreachable unsent")
        #expect(machine.backoffEnded(id(0, 1)).summary == "", "nobody waits: the room is free")
        #expect(counts(machine) == "open 0 idle 0 waiting 0")
        #expect(machine.backoffEnded(id(0, 1)).summary == "", "ended twice: nothing")
    }

    @Test("the backoff grows by a quarter for each failed connect in a row, at most 2 s; a connection that opens starts it again")
    func backoffGrowth() {
        #expect(Machine.backoff(afterFailures: 1) == .milliseconds(100))
        #expect(Machine.backoff(afterFailures: 2) == .milliseconds(125))
        #expect(Machine.backoff(afterFailures: 3) == .nanoseconds(156_250_000))
        #expect(Machine.backoff(afterFailures: 14) < .seconds(2) && Machine.backoff(afterFailures: 15) == .seconds(2))
        #expect(Machine.backoff(afterFailures: 1_000) == .seconds(2))

        var machine = Machine(limit: 4, idleTicksBeforeClose: 2)
        _ = execute(&machine, Request("a"))
        #expect(machine.connectionFailed(id(0), timedOut: false).summary == "backOff #0.0 100ms, fail a unreachable unsent")
        _ = execute(&machine, Request("b"))
        #expect(machine.connectionFailed(id(1), timedOut: false).summary == "backOff #1.0 125ms, fail b unreachable unsent")
        _ = execute(&machine, Request("c"))
        #expect(machine.connectionEstablished(id(2), "c2").summary == "startIdleSweep, run c on c2")
        _ = execute(&machine, Request("d"))
        #expect(machine.connectionFailed(id(3), timedOut: true).summary == "backOff #3.0 100ms, fail d connectTimedOut unsent")
    }

    @Test("while every connection of a peer backs off, a request that would have to wait fails at once with the last connect failure; one with room left tries")
    func backingOffPeer() {
        var single = Machine(limit: 1, idleTicksBeforeClose: 2)
        _ = execute(&single, Request("r1"))
        _ = single.connectionFailed(id(0), timedOut: true)
        #expect(execute(&single, Request("r2")) == "fail r2 connectTimedOut unsent")
        #expect(counts(single) == "open 1 idle 0 waiting 0 backingOff 1")
        #expect(single.backoffEnded(id(0)).summary == "")
        #expect(execute(&single, Request("r3")) == "create #0.1 127.0.0.1:8080", "the backoff over, the next request tries")

        var two = Machine(limit: 2, idleTicksBeforeClose: 2)
        _ = execute(&two, Request("a"))
        _ = two.connectionFailed(id(0), timedOut: false)
        #expect(execute(&two, Request("b")) == "create #1.0 127.0.0.1:8080", "room left: it tries")
        #expect(execute(&two, Request("c")) == "", "a connect under way: it waits for it")
        #expect(two.connectionEstablished(id(1), "c1").summary == "startIdleSweep, run b on c1")
        #expect(two.responseReceived(on: id(1), keepAlive: true).summary == "run c on c1, succeed b")
    }

    @Test("a backoff at shutdown ends in nothing; a connection cannot close, nor a backoff end, on a slot in another state")
    func backoffImpossibleEvents() {
        var machine = Machine(limit: 2, idleTicksBeforeClose: 2)
        _ = execute(&machine, Request("a"))
        _ = machine.connectionFailed(id(0), timedOut: false)
        #expect(machine.connectionClosed(id(0)).summary == "", "no connection was established in it")
        #expect(machine.shutdown().summary == "")
        #expect(counts(machine) == "open 0 idle 0 waiting 0")
        #expect(machine.backoffEnded(id(0)).summary == "", "its timer fired after shutdown")

        var idle = withIdleConnection()
        #expect(idle.backoffEnded(id(0)).summary == "", "an idle connection is not backing off")
        #expect(counts(idle) == "open 1 idle 1 waiting 0")
    }

    @Test("the sweep fails requests past their deadline: waiting, being connected for, or running (its connection closes)")
    func deadlines() {
        var machine = Machine(limit: 2, idleTicksBeforeClose: 2)
        let (running, connecting, waiting, later) = (Request("running"), Request("connecting"), Request("waiting"), Request("later"))
        _ = execute(&machine, running, due: 1)
        _ = execute(&machine, connecting, due: 1)
        _ = execute(&machine, waiting, due: 1)
        _ = execute(&machine, later, due: 5)
        _ = machine.connectionEstablished(id(0), "c0")

        let early = machine.deadlineTick(now: Self.start)
        #expect(early.summary == "keepTicking")
        let sweep = machine.deadlineTick(now: Self.start + .seconds(1))
        #expect(sweep.summary == "fail waiting timedOut unsent, fail running timedOut, fail connecting timedOut unsent, close c0, keepTicking")
        #expect(counts(machine) == "open 2 idle 0 waiting 1")
        // The connection opened for a request that timed out serves the next one.
        #expect(machine.connectionEstablished(id(1), "c1").summary == "run later on c1")
        #expect(machine.responseReceived(on: id(1), keepAlive: true).summary == "succeed later")
        #expect(machine.deadlineTick(now: Self.start + .seconds(9)).summary == "", "nothing held: the sweep stops")
        #expect(execute(&machine, Request("next")) == "startDeadlineSweep, run next on c1", "and starts again")
    }

    @Test("a streamed request body: no deadline while it is being sent (its pauses are the connection's), timeout from when it was sent")
    func uploadDeadline() {
        var machine = withIdleConnection()
        let upload = Request("upload")
        #expect(execute(&machine, upload, due: 1) == "run upload on c0")
        machine.requestBodyStreams(on: id(0))
        #expect(machine.deadlineTick(now: Self.start + .seconds(1)).summary == "",
                "past timeout while the body is still being sent: not cut, and nothing to watch (the sweep stops)")
        #expect(machine.deadlineTick(now: Self.start + .seconds(600)).summary == "")
        let sent = Self.start + .seconds(600)
        #expect(machine.requestBodySent(on: id(0), deadline: sent + .seconds(1)).summary == "startDeadlineSweep",
                "sent: the wait for the head is watched again")
        #expect(machine.requestBodySent(on: id(1), deadline: sent).summary == "", "no such connection")
        #expect(machine.deadlineTick(now: sent + .milliseconds(500)).summary == "keepTicking")
        #expect(machine.deadlineTick(now: sent + .seconds(1)).summary == "fail upload timedOut, close c0")
        machine.requestBodyStreams(on: id(0))
        #expect(counts(machine) == "open 1 idle 0 waiting 0", "late: nothing changes")
    }

    @Test("a failure is marked unsent only until a connection may have written the request, a retry's included")
    func unsentOnlyBeforeAWrite() {
        // Not written on a reused connection that had closed, then no new connection: nothing went out.
        var machine = withIdleConnection()
        let post = Request("post")
        _ = execute(&machine, post, retryable: false)
        #expect(machine.closedBeforeResponse(on: id(0), requestSent: false).summary == "create #1.0 127.0.0.1:8080")
        #expect(machine.connectionFailed(id(1), timedOut: false).summary == "backOff #1.0 100ms, fail post unreachable unsent")

        // Written once, then retried: its new connection fails to open, yet the first attempt may have arrived.
        var retried = withTwoIdleConnections()
        let get = Request("get")
        _ = execute(&retried, get)
        #expect(retried.closedBeforeResponse(on: id(1), requestSent: true).summary == "run get on c0")
        #expect(retried.closedBeforeResponse(on: id(0), requestSent: false).summary == "create #2.0 127.0.0.1:8080")
        #expect(retried.connectionFailed(id(2), timedOut: false).summary == "backOff #2.0 100ms, fail get unreachable")

        // Written once, then waiting for a connection for its retry until its deadline.
        var queued = withIdleConnection(limit: 1)
        let again = Request("again")
        _ = execute(&queued, again, due: 1)
        #expect(queued.closedBeforeResponse(on: id(0), requestSent: true).summary == "", "waits: the closing connection still counts")
        #expect(queued.deadlineTick(now: Self.start + .seconds(1)).summary == "fail again timedOut")
    }

    @Test("a timeout after the answer, a cancel after it, a second answer: nothing")
    func lateEvents() {
        var machine = withIdleConnection()
        let request = Request("r")
        _ = execute(&machine, request, due: 1)
        #expect(machine.responseReceived(on: id(0), keepAlive: true).summary == "succeed r")
        #expect(machine.responseReceived(on: id(0), keepAlive: true).summary == "", "a second completion")
        #expect(machine.requestFailed(on: id(0), .closedMidResponse).summary == "")
        #expect(machine.closedBeforeResponse(on: id(0), requestSent: true).summary == "")
        #expect(machine.cancel(request).summary == "", "cancel after finish")
        #expect(machine.deadlineTick(now: Self.start + .seconds(60)).summary == "", "timeout after completion")
        #expect(counts(machine) == "open 1 idle 1 waiting 0")
    }

    @Test("events about a closed connection never reach the one that took its slot")
    func staleConnection() {
        var machine = withIdleConnection(limit: 1)
        #expect(machine.connectionClosed(id(0)).summary == "", "the peer closed it while idle")
        #expect(counts(machine) == "open 0 idle 0 waiting 0")
        let request = Request("r")
        #expect(execute(&machine, request) == "create #0.1 127.0.0.1:8080")
        #expect(machine.connectionEstablished(id(0, 1), "c1").summary == "run r on c1")
        #expect(machine.responseReceived(on: id(0), keepAlive: true).summary == "", "release of the closed connection")
        #expect(machine.connectionClosed(id(0)).summary == "")
        #expect(machine.connectionEstablished(id(0), "c0").summary == "close c0", "an unknown connection is closed")
        #expect(machine.responseReceived(on: id(0, 1), keepAlive: true).summary == "succeed r")
    }

    @Test("a connection that vanishes while busy fails its request")
    func vanished() {
        var machine = withIdleConnection()
        let request = Request("r")
        _ = execute(&machine, request)
        #expect(machine.connectionClosed(id(0)).summary == "fail r closedWithoutAnswer")
    }

    @Test("cancel: a waiting request leaves the queue, a running one closes its connection, one being connected for lets it go on")
    func cancel() {
        var machine = Machine(limit: 1, idleTicksBeforeClose: 2)
        let (r1, r2) = (Request("r1"), Request("r2"))
        _ = execute(&machine, r1)
        _ = execute(&machine, r2)
        #expect(machine.cancel(r2).summary == "fail r2 cancelled unsent")
        #expect(machine.cancel(r1).summary == "fail r1 cancelled unsent")
        #expect(machine.connectionEstablished(id(0), "c0").summary == "startIdleSweep", "it idles")
        #expect(counts(machine) == "open 1 idle 1 waiting 0")
        let r3 = Request("r3")
        _ = execute(&machine, r3)
        #expect(machine.cancel(r3).summary == "close c0, fail r3 cancelled")
        #expect(machine.cancel(r3).summary == "", "once")
    }

    @Test("the idle sweep closes connections idle longer than its ticks, and stops once none is open")
    func idleSweep() {
        var machine = withIdleConnection()
        #expect(machine.idleTick().summary == "keepTicking")
        #expect(machine.idleTick().summary == "keepTicking")
        let request = Request("r")
        _ = execute(&machine, request)
        _ = machine.responseReceived(on: id(0), keepAlive: true)
        #expect(machine.idleTick().summary == "keepTicking", "used since: kept")
        #expect(machine.idleTick().summary == "keepTicking")
        #expect(machine.idleTick().summary == "close c0", "idle for more than 2 ticks; nothing left to watch")
        #expect(counts(machine) == "open 1 idle 0 waiting 0")
        _ = machine.connectionClosed(id(0))
        _ = execute(&machine, Request("next"))
        #expect(machine.connectionEstablished(id(0, 1), "c1").summary == "startIdleSweep, run next on c1")
    }

    @Test("shutdown with waiters: every request held fails, every open connection closes, later ones fail at once")
    func shutdown() {
        var machine = Machine(limit: 2, idleTicksBeforeClose: 2)
        let (running, connecting, waiting) = (Request("running"), Request("connecting"), Request("waiting"))
        _ = execute(&machine, running)
        _ = execute(&machine, connecting)
        _ = execute(&machine, waiting)
        _ = machine.connectionEstablished(id(0), "c0")
        #expect(machine.shutdown().summary
            == "fail waiting shuttingDown unsent, fail running shuttingDown, fail connecting shuttingDown unsent, close c0")
        #expect(machine.shutdown().summary == "", "once")
        #expect(execute(&machine, Request("late")) == "fail late shuttingDown unsent")
        #expect(machine.connectionEstablished(id(1), "c1").summary == "close c1", "a connection that opens after shutdown closes")
        #expect(machine.connectionClosed(id(0)).summary == "", "no new connection for anyone")
        #expect(machine.deadlineTick(now: Self.start).summary == "")
    }

    @Test("each peer has its own limit and its own idle connections")
    func peers() {
        var machine = Machine(limit: 1, idleTicksBeforeClose: 2)
        let (a, b) = (Request("a"), Request("b"))
        _ = execute(&machine, a)
        #expect(machine.execute(b, host: Self.host, port: 9090, deadline: Self.start + .seconds(10), retryable: true).summary
            == "create #1.0 127.0.0.1:9090")
        _ = machine.connectionEstablished(id(1), "d0")
        _ = machine.responseReceived(on: id(1), keepAlive: true)
        #expect(counts(machine) == "open 1 idle 0 waiting 0")
        #expect(counts(machine, port: 9090) == "open 1 idle 1 waiting 0")
    }

    // MARK: Streamed bodies

    @Test("a streamed answer: its request succeeds with the head; the connection stays taken until the body ends, then serves the next")
    func streamedBody() {
        var machine = Machine(limit: 1, idleTicksBeforeClose: 2)
        let (r1, r2) = (Request("r1"), Request("r2"))
        _ = execute(&machine, r1)
        _ = machine.connectionEstablished(id(0), "c0")
        #expect(machine.responseHeadReceived(on: id(0)).summary == "succeed r1")
        #expect(execute(&machine, r2) == "", "the connection still carries r1's body")
        #expect(machine.deadlineTick(now: Self.start + .seconds(60)).summary == "fail r2 timedOut unsent",
                "no request deadline for a body being streamed: only the waiting request's")
        let r3 = Request("r3")
        _ = execute(&machine, r3, due: 120)
        #expect(machine.bodyEnded(on: id(0), keepAlive: true).summary == "run r3 on c0")
        #expect(machine.responseReceived(on: id(0), keepAlive: true).summary == "succeed r3")
        #expect(counts(machine) == "open 1 idle 1 waiting 0")
    }

    @Test("a streamed body cut (the client left, the upstream failed): the connection is never reused; its close frees the room")
    func streamedBodyCut() {
        var machine = Machine(limit: 1, idleTicksBeforeClose: 2)
        _ = execute(&machine, Request("r1"))
        _ = machine.connectionEstablished(id(0), "c0")
        _ = machine.responseHeadReceived(on: id(0))
        let next = Request("r2")
        _ = execute(&machine, next, due: 100)
        #expect(machine.bodyEnded(on: id(0), keepAlive: false).summary == "", "closing: not given to r2")
        #expect(counts(machine) == "open 1 idle 0 waiting 1")
        #expect(machine.connectionClosed(id(0)).summary == "create #0.1 127.0.0.1:8080", "r2 gets a connection of its own")
    }

    @Test("shutdown closes a connection whose body streams; its stream is failed by the connection")
    func streamedBodyShutdown() {
        var machine = Machine(limit: 1, idleTicksBeforeClose: 2)
        _ = execute(&machine, Request("r1"))
        _ = machine.connectionEstablished(id(0), "c0")
        _ = machine.responseHeadReceived(on: id(0))
        #expect(machine.shutdown().summary == "close c0")
        #expect(machine.bodyEnded(on: id(0), keepAlive: true).summary == "", "a late end finds the slot closing")
    }
}

extension UpstreamPoolStateMachine.Action {
    /// The actions in the order the pool performs them, in words.
    var summary: String {
        var parts: [String] = []
        switch timer {
        case .none: break
        case .startDeadlineSweep: parts.append("startDeadlineSweep")
        case .startIdleSweep: parts.append("startIdleSweep")
        }
        switch connection {
        case .none: break
        case .run(let request, let connection): parts.append("run \(request) on \(connection)")
        case .create(let id, let host, let port, _): parts.append("create \(id) \(host):\(port)")
        case .close(let connection): parts.append("close \(connection)")
        case .backOff(let id, let delay): parts.append("backOff \(id) \(delay.nanoseconds / 1_000_000)ms")
        }
        switch request {
        case .none: break
        case .succeed(let request): parts.append("succeed \(request)")
        case .fail(let request, let failure, let neverSent): parts.append("fail \(request) \(failure)" + (neverSent ? " unsent" : ""))
        }
        return parts.joined(separator: ", ")
    }

}

extension UpstreamPoolStateMachine.SweepAction {
    /// What a sweep found, in words.
    var summary: String {
        var parts = failed.map { "fail \($0.0) \($0.1)" + ($0.neverSent ? " unsent" : "") }
        parts += close.map { "close \($0)" }
        if keepTicking { parts.append("keepTicking") }
        return parts.joined(separator: ", ")
    }
}
