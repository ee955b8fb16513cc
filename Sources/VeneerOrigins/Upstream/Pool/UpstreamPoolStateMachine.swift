import DequeModule
import NIOCore

/// The connections of one event loop to its upstreams, as a value: per peer (host and port)
/// the connections being opened, idle or busy, and the requests waiting for one.
/// ``UpstreamLoopPool`` feeds it events and performs the ``Action``s it returns; it has no
/// channel, and only the clock readings it is given.
///
/// Every request it accepts is in exactly one place until it leaves: waiting in its peer's
/// queue, riding on a connection being opened for it, or running on a busy connection. It
/// leaves once, by exactly one ``RequestAction`` (`succeed` or `fail`), so a request cannot
/// be finished twice, and an event about a request or connection that is no longer there (a
/// late timeout, a cancel after the answer, a second completion) finds nothing and does
/// nothing.
///
/// A request fails marked `neverSent` only while no connection can have written a byte of it:
/// it waited, or its connection was never opened or was found gone before the write (what
/// lets a caller send again even a request that must not arrive twice, a refresh token
/// grant: ``ProxyError/requestNeverSent``). Once a connection took it, every failure may
/// have reached the upstream, a retry of it included.
///
/// A connection is named by a ``ConnectionID``: its slot and the slot's generation, so an
/// event about a connection long closed never reaches the one that reuses its slot.
///
/// A connect that fails backs off, as AsyncHTTPClient's pool does: its request fails (at once,
/// as before), and the room it took stays taken for ``backoff(afterFailures:)`` (100 ms,
/// a quarter more for each failure in a row, at most 2 s) before a waiting request may open
/// a connection in it, so that an upstream that refuses or times out is not asked again by
/// every waiting request in turn. A connection that opens ends the run of failures. While
/// every connection of a peer is backing off, a request that would have to wait fails at
/// once with the last connect failure (never sent), as nginx answers when no upstream is
/// live: it would only wait for a connect to an upstream that just failed one.
struct UpstreamPoolStateMachine<Request: AnyObject, Connection> {
    /// A connection's slot in the pool and which use of that slot it is.
    struct ConnectionID: Hashable, Sendable, CustomStringConvertible {
        let index: Int
        let generation: UInt32
        var description: String { "#\(index).\(generation)" }
    }

    /// A request the pool holds, and when it must be done.
    struct Entry {
        let request: Request
        /// `.distantFuture` while its streamed body is being sent (see ``requestBodyStreams(on:)``).
        var deadline: NIODeadline
        /// Idempotent (RFC 9110 §9.2.2) and not retried yet.
        var mayRetry: Bool
        /// An earlier attempt was written to a connection that then closed (it is being retried).
        var mayHaveBeenSent = false
    }

    /// How a request ends.
    enum RequestAction {
        case none
        /// The response that came with the event is its answer.
        case succeed(Request)
        /// `neverSent`: no connection can have written a byte of it.
        case fail(Request, UpstreamFailure, neverSent: Bool)
    }

    /// What to do with a connection.
    enum ConnectionAction {
        case none
        /// Send `Request` on `Connection` (idle until now, or just opened).
        case run(Request, on: Connection)
        /// Open a connection for slot `ConnectionID`; the attempt may last until `deadline`
        /// (the request's own), capped by the connect timeout.
        case create(ConnectionID, host: String, port: Int, deadline: NIODeadline)
        /// Close it (the pool gave up on it).
        case close(Connection)
        /// Slot `ConnectionID`'s connect failed: report ``backoffEnded(_:)`` after `delay`.
        case backOff(ConnectionID, delay: TimeAmount)
    }

    /// Which sweep to start ticking.
    enum TimerAction: Equatable {
        case none
        /// ``deadlineTick(now:)`` every short interval, while requests are held.
        case startDeadlineSweep
        /// ``idleTick()`` every few seconds, while connections are open.
        case startIdleSweep
    }

    /// The answer to most events. The pool performs `timer`, then `connection`, then
    /// `request`: a connection is released (and may carry the next waiting request) before
    /// the caller hears of its answer, so that a caller answered by callback can send its
    /// next request at once.
    struct Action {
        var request = RequestAction.none
        var connection = ConnectionAction.none
        var timer = TimerAction.none
        /// The request of the event, which goes again on another connection (for the metrics,
        /// and its trace: another attempt).
        var resent: Request?
        /// Whether the request of the event goes again.
        var retried: Bool { resent != nil }
    }

    /// What a sweep found: requests past their deadline, and connections to close.
    struct SweepAction {
        var failed: [(Request, UpstreamFailure, neverSent: Bool)] = []
        var close: [Connection] = []
        /// False when there is nothing left to watch: the sweep stops until started again.
        var keepTicking = false
    }

    private enum SlotState {
        /// Unused.
        case free
        /// Being opened for a request (nil once that request has ended: then the connection
        /// goes to the next waiting request, or idles).
        case connecting(Entry?)
        /// Open and idle since idle tick `since`.
        case idle(Connection, since: UInt64)
        /// Carrying `Entry`'s request; `reused` when it had carried one before.
        case busy(Connection, Entry, reused: Bool)
        /// Its request was answered with a head whose body still streams to the caller: not
        /// free until the body ends, and no request deadline applies (the stream's pauses are
        /// bounded by the connection itself).
        case streaming(Connection)
        /// Being closed: it still counts against the limit until its close is reported.
        case closing
        /// Its connect failed: it still counts against the limit until its backoff ends.
        case backingOff
    }

    private struct Slot {
        var generation: UInt32
        var peer: Int
        var state: SlotState
    }

    private struct Peer {
        let host: String
        let port: Int
        /// Slots of idle connections; the most recently used last (reused first, so that the
        /// others can age out).
        var idle: [Int] = []
        /// Connections opening, idle, busy, closing or backing off.
        var open = 0
        /// Of those, the ones backing off after a failed connect.
        var backingOff = 0
        /// Connects that failed in a row (a connection that opens resets it), and how the last one failed.
        var connectFailures = 0
        var lastConnectFailure = UpstreamFailure.unreachable
        var waiting = Deque<Entry>()
    }

    private enum Lifecycle {
        case running
        case shutDown
    }

    private enum Sweep {
        case stopped
        case ticking
    }

    /// The most connections per peer.
    let limit: Int
    /// How many idle ticks an idle connection outlives before it is closed.
    let idleTicksBeforeClose: UInt64
    /// Usually one: looked up by comparing host and port, no hashing.
    private var peers: [Peer] = []
    private var slots: [Slot] = []
    private var freeSlots: [Int] = []
    private var lifecycle = Lifecycle.running
    private var deadlineSweep = Sweep.stopped
    private var idleSweep = Sweep.stopped
    private var idleTicks: UInt64 = 0

    init(limit: Int, idleTicksBeforeClose: UInt64) {
        self.limit = max(1, limit)
        self.idleTicksBeforeClose = idleTicksBeforeClose
    }

    // MARK: - Events

    /// A request arrives for `host`:`port`: it runs on an idle connection, opens a new one, or
    /// waits for one (never past `deadline`). `retryable` for idempotent methods.
    mutating func execute(_ request: Request, host: String, port: Int, deadline: NIODeadline, retryable: Bool) -> Action {
        guard case .running = lifecycle else {
            return Action(request: .fail(request, .shuttingDown, neverSent: true))
        }
        var action = dispatch(Entry(request: request, deadline: deadline, mayRetry: retryable), peer: peer(host, port))
        if case .none = action.request, case .stopped = deadlineSweep {
            deadlineSweep = .ticking
            action.timer = .startDeadlineSweep
        }
        return action
    }

    /// The connection of slot `id` is open.
    mutating func connectionEstablished(_ id: ConnectionID, _ connection: Connection) -> Action {
        guard isCurrent(id), case .connecting(let entry) = slots[id.index].state else { return Action(connection: .close(connection)) }
        peers[slots[id.index].peer].connectFailures = 0
        guard case .running = lifecycle else {
            slots[id.index].state = .closing
            return Action(request: entry.map { .fail($0.request, .shuttingDown, neverSent: !$0.mayHaveBeenSent) } ?? .none,
                          connection: .close(connection))
        }
        var action = Action()
        if case .stopped = idleSweep {
            idleSweep = .ticking
            action.timer = .startIdleSweep
        }
        if let entry {
            slots[id.index].state = .busy(connection, entry, reused: false)
            action.connection = .run(entry.request, on: connection)
        } else {
            action.connection = release(id.index, connection, reused: false)
        }
        return action
    }

    /// The connection of slot `id` could not be opened: its request fails, and its room stays
    /// taken until the backoff ends (``backoffEnded(_:)``).
    mutating func connectionFailed(_ id: ConnectionID, timedOut: Bool) -> Action {
        guard isCurrent(id), case .connecting(let entry) = slots[id.index].state else { return Action() }
        let peer = slots[id.index].peer
        let failure: UpstreamFailure = timedOut ? .connectTimedOut : .unreachable
        var action = Action()
        if let entry { action.request = .fail(entry.request, failure, neverSent: !entry.mayHaveBeenSent) }
        guard case .running = lifecycle else {
            freeSlot(id.index)
            return action
        }
        peers[peer].connectFailures += 1
        peers[peer].lastConnectFailure = failure
        peers[peer].backingOff += 1
        slots[id.index].state = .backingOff
        action.connection = .backOff(id, delay: Self.backoff(afterFailures: peers[peer].connectFailures))
        return action
    }

    /// The backoff of slot `id` ended: its room goes to the first waiting request's own
    /// connection, or is free.
    mutating func backoffEnded(_ id: ConnectionID) -> Action {
        guard isCurrent(id), case .backingOff = slots[id.index].state else { return Action() }
        let peer = slots[id.index].peer
        freeSlot(id.index)
        return Action(connection: serveWaiting(peer))
    }

    /// How long the room of a failed connect stays taken, after `failures` failed in a row:
    /// 100 ms × 1.25^(failures − 1), at most 2 s (AsyncHTTPClient's curve, whose 60 s cap
    /// would leave a local upstream that came back unused for a minute).
    static func backoff(afterFailures failures: Int) -> TimeAmount {
        let cap = 2_000_000_000.0
        var nanoseconds = 100_000_000.0
        for _ in 1..<max(1, failures) where nanoseconds < cap { nanoseconds *= 1.25 }
        return .nanoseconds(Int64(min(nanoseconds, cap)))
    }

    /// A whole response arrived on connection `id`; `keepAlive` when the connection may carry
    /// another request (else it is closing).
    mutating func responseReceived(on id: ConnectionID, keepAlive: Bool) -> Action {
        guard isCurrent(id), case .busy(let connection, let entry, _) = slots[id.index].state else { return Action() }
        var action = Action(request: .succeed(entry.request))
        if !keepAlive {
            slots[id.index].state = .closing
        } else if case .running = lifecycle {
            action.connection = release(id.index, connection, reused: true)
        } else {
            slots[id.index].state = .closing
            action.connection = .close(connection)
        }
        return action
    }

    /// The head of a response whose body streams arrived on connection `id`: its request
    /// succeeds now, and the connection stays taken until the body ends.
    mutating func responseHeadReceived(on id: ConnectionID) -> Action {
        guard isCurrent(id), case .busy(let connection, let entry, _) = slots[id.index].state else { return Action() }
        slots[id.index].state = .streaming(connection)
        return Action(request: .succeed(entry.request))
    }

    /// The streamed body on connection `id` ended; `keepAlive` when the connection may carry
    /// another request (else it is closing). A body cut (its consumer left, the upstream failed)
    /// ends with `keepAlive` false: that connection is never reused.
    mutating func bodyEnded(on id: ConnectionID, keepAlive: Bool) -> Action {
        guard isCurrent(id), case .streaming(let connection) = slots[id.index].state else { return Action() }
        if keepAlive, case .running = lifecycle {
            return Action(connection: release(id.index, connection, reused: true))
        }
        slots[id.index].state = .closing
        return keepAlive ? Action(connection: .close(connection)) : Action()
    }

    /// The request on connection `id` streams its body: its deadline waits until that body has
    /// been sent (``requestBodySent(on:deadline:)``), as nginx's `proxy_read_timeout` starts once
    /// the request is written; the pauses in sending it are the connection's to bound
    /// (`body_timeout`, as `proxy_send_timeout`), so an upload may take longer than `timeout`.
    mutating func requestBodyStreams(on id: ConnectionID) {
        guard isCurrent(id), case .busy(let connection, var entry, let reused) = slots[id.index].state else { return }
        entry.deadline = .distantFuture
        slots[id.index].state = .busy(connection, entry, reused: reused)
    }

    /// The streamed body of the request on connection `id` has been sent and its answer's head
    /// is awaited: from now, until `deadline` (now plus `timeout`).
    mutating func requestBodySent(on id: ConnectionID, deadline: NIODeadline) -> Action {
        guard isCurrent(id), case .busy(let connection, var entry, let reused) = slots[id.index].state else { return Action() }
        entry.deadline = deadline
        slots[id.index].state = .busy(connection, entry, reused: reused)
        var action = Action()
        if case .stopped = deadlineSweep, case .running = lifecycle {
            deadlineSweep = .ticking
            action.timer = .startDeadlineSweep
        }
        return action
    }

    /// The exchange on connection `id` failed (a malformed, oversized or cut-off response);
    /// the connection is closing.
    mutating func requestFailed(on id: ConnectionID, _ failure: UpstreamFailure) -> Action {
        guard isCurrent(id), case .busy(_, let entry, _) = slots[id.index].state else { return Action() }
        slots[id.index].state = .closing
        return Action(request: .fail(entry.request, failure, neverSent: false))
    }

    /// Connection `id` ended before a byte of the response; it is closing. `requestSent` is
    /// false when the request never went out (the connection was already gone).
    ///
    /// A request that found its reused connection closed may never have reached the upstream:
    /// an idempotent one is sent again once, on another connection (RFC 9110 §9.2.2, as nginx
    /// does); one that was never sent goes again whatever its method.
    mutating func closedBeforeResponse(on id: ConnectionID, requestSent: Bool) -> Action {
        guard isCurrent(id), case .busy(_, var entry, let reused) = slots[id.index].state else { return Action() }
        let peer = slots[id.index].peer
        slots[id.index].state = .closing
        if requestSent { entry.mayHaveBeenSent = true }
        guard reused, !requestSent || entry.mayRetry, case .running = lifecycle else {
            return Action(request: .fail(entry.request, .closedWithoutAnswer, neverSent: !entry.mayHaveBeenSent))
        }
        if requestSent { entry.mayRetry = false }
        var action = dispatch(entry, peer: peer)
        if case .none = action.request { action.resent = entry.request }
        return action
    }

    /// Connection `id` closed (its channel's close completed): it no longer counts, and a
    /// waiting request may open another.
    mutating func connectionClosed(_ id: ConnectionID) -> Action {
        guard isCurrent(id) else { return Action() }
        let peer = slots[id.index].peer
        var action = Action()
        switch slots[id.index].state {
        case .free, .connecting, .backingOff:
            // Reported only for connections that were established.
            return action
        case .idle:
            if let at = peers[peer].idle.firstIndex(of: id.index) { peers[peer].idle.remove(at: at) }
        case .busy(_, let entry, _):
            // The connection went without telling its request: it was not answered.
            action.request = .fail(entry.request, .closedWithoutAnswer, neverSent: false)
        case .closing, .streaming:
            // A streamed body's end or cut is its stream's to tell.
            break
        }
        freeSlot(id.index)
        action.connection = serveWaiting(peer)
        return action
    }

    /// The request's caller gave up on it: it fails, and the connection it was running on
    /// (whose state is now unknown) closes. Nothing, if the request already ended.
    mutating func cancel(_ request: Request) -> Action {
        for peer in peers.indices {
            if let at = peers[peer].waiting.firstIndex(where: { $0.request === request }) {
                let entry = peers[peer].waiting.remove(at: at)
                return Action(request: .fail(request, .cancelled, neverSent: !entry.mayHaveBeenSent))
            }
        }
        for index in slots.indices {
            switch slots[index].state {
            case .connecting(let entry?) where entry.request === request:
                slots[index].state = .connecting(nil)
                return Action(request: .fail(request, .cancelled, neverSent: !entry.mayHaveBeenSent))
            case .busy(let connection, let entry, _) where entry.request === request:
                slots[index].state = .closing
                return Action(request: .fail(request, .cancelled, neverSent: false), connection: .close(connection))
            default:
                continue
            }
        }
        return Action()
    }

    /// The deadline sweep ticks at `now`: requests past their deadline fail with a timeout
    /// (a busy connection's is closed, one being opened goes on for the next request).
    mutating func deadlineTick(now: NIODeadline) -> SweepAction {
        var sweep = SweepAction()
        var holding = false
        for peer in peers.indices where !peers[peer].waiting.isEmpty {
            if peers[peer].waiting.contains(where: { $0.deadline <= now }) {
                var kept = Deque<Entry>()
                for entry in peers[peer].waiting {
                    if entry.deadline <= now {
                        sweep.failed.append((entry.request, .timedOut, neverSent: !entry.mayHaveBeenSent))
                    } else {
                        kept.append(entry)
                    }
                }
                peers[peer].waiting = kept
            }
            holding = holding || !peers[peer].waiting.isEmpty
        }
        for index in slots.indices {
            switch slots[index].state {
            case .connecting(let entry?):
                if entry.deadline <= now {
                    slots[index].state = .connecting(nil)
                    sweep.failed.append((entry.request, .timedOut, neverSent: !entry.mayHaveBeenSent))
                } else {
                    holding = true
                }
            case .busy(let connection, let entry, _):
                if entry.deadline <= now {
                    slots[index].state = .closing
                    sweep.failed.append((entry.request, .timedOut, neverSent: false))
                    sweep.close.append(connection)
                } else if entry.deadline != .distantFuture {
                    // A body being sent has no deadline to watch (its connection bounds the pauses).
                    holding = true
                }
            case .free, .connecting(nil), .idle, .closing, .backingOff, .streaming:
                continue
            }
        }
        if holding, case .running = lifecycle {
            sweep.keepTicking = true
        } else {
            // Nothing held: stop ticking until the next request.
            deadlineSweep = .stopped
        }
        return sweep
    }

    /// The idle sweep ticks: connections idle for more than ``idleTicksBeforeClose`` ticks
    /// close. It stops when no connection is idle or busy.
    mutating func idleTick() -> SweepAction {
        idleTicks += 1
        var sweep = SweepAction()
        // Idle and busy connections may outstay the timeout; one being opened starts the sweep again when it is.
        var watching = false
        for index in slots.indices {
            switch slots[index].state {
            case .idle(let connection, let since) where idleTicks - since > idleTicksBeforeClose:
                let peer = slots[index].peer
                if let at = peers[peer].idle.firstIndex(of: index) { peers[peer].idle.remove(at: at) }
                slots[index].state = .closing
                sweep.close.append(connection)
            case .idle, .busy, .streaming:
                watching = true
            case .free, .connecting, .closing, .backingOff:
                continue
            }
        }
        if watching, case .running = lifecycle {
            sweep.keepTicking = true
        } else {
            idleSweep = .stopped
        }
        return sweep
    }

    /// The transport shuts down: every request held fails, every open connection closes
    /// (those still being opened close once they are), and later requests fail at once.
    mutating func shutdown() -> SweepAction {
        var sweep = SweepAction()
        guard case .running = lifecycle else { return sweep }
        lifecycle = .shutDown
        deadlineSweep = .stopped
        idleSweep = .stopped
        for peer in peers.indices {
            for entry in peers[peer].waiting { sweep.failed.append((entry.request, .shuttingDown, neverSent: !entry.mayHaveBeenSent)) }
            peers[peer].waiting.removeAll()
            peers[peer].idle.removeAll()
        }
        for index in slots.indices {
            switch slots[index].state {
            case .connecting(let entry?):
                slots[index].state = .connecting(nil)
                sweep.failed.append((entry.request, .shuttingDown, neverSent: !entry.mayHaveBeenSent))
            case .idle(let connection, _):
                slots[index].state = .closing
                sweep.close.append(connection)
            case .busy(let connection, let entry, _):
                slots[index].state = .closing
                sweep.failed.append((entry.request, .shuttingDown, neverSent: false))
                sweep.close.append(connection)
            case .streaming(let connection):
                slots[index].state = .closing
                sweep.close.append(connection)
            case .backingOff:
                // Its timer finds the slot free (a new generation): nothing.
                freeSlot(index)
            case .free, .connecting(nil), .closing:
                continue
            }
        }
        return sweep
    }

    // MARK: - Inspection (tests, and metrics later)

    /// Connections per peer (opening, idle, busy, closing or backing off), idle ones, those
    /// backing off, and waiting requests.
    func counts(host: String, port: Int) -> (open: Int, idle: Int, backingOff: Int, waiting: Int) {
        guard let peer = peers.firstIndex(where: { $0.port == port && $0.host == host }) else { return (0, 0, 0, 0) }
        return (peers[peer].open, peers[peer].idle.count, peers[peer].backingOff, peers[peer].waiting.count)
    }

    // MARK: - Helpers

    private mutating func peer(_ host: String, _ port: Int) -> Int {
        for index in peers.indices where peers[index].port == port && peers[index].host == host { return index }
        peers.append(Peer(host: host, port: port))
        return peers.count - 1
    }

    private func isCurrent(_ id: ConnectionID) -> Bool {
        id.index < slots.count && slots[id.index].generation == id.generation
    }

    /// An idle connection, else a new one, else the queue; or, while every connection of the
    /// peer backs off, the failure of the last connect.
    private mutating func dispatch(_ entry: Entry, peer: Int) -> Action {
        if let index = peers[peer].idle.popLast() {
            guard case .idle(let connection, _) = slots[index].state else {
                preconditionFailure("An upstream connection listed as idle is \(slots[index].state).")
            }
            slots[index].state = .busy(connection, entry, reused: true)
            return Action(connection: .run(entry.request, on: connection))
        }
        if peers[peer].open < limit { return Action(connection: create(for: entry, peer: peer)) }
        if peers[peer].backingOff == peers[peer].open {
            // No connection could take it before a backoff ends: the upstream just failed a connect.
            return Action(request: .fail(entry.request, peers[peer].lastConnectFailure, neverSent: !entry.mayHaveBeenSent))
        }
        peers[peer].waiting.append(entry)
        return Action()
    }

    /// Slot `index`'s connection is free: the next waiting request gets it, or it idles.
    private mutating func release(_ index: Int, _ connection: Connection, reused: Bool) -> ConnectionAction {
        let peer = slots[index].peer
        if let next = peers[peer].waiting.popFirst() {
            slots[index].state = .busy(connection, next, reused: reused)
            return .run(next.request, on: connection)
        }
        slots[index].state = .idle(connection, since: idleTicks)
        peers[peer].idle.append(index)
        return .none
    }

    /// A connection closed or failed to open: room for the next waiting request's own.
    private mutating func serveWaiting(_ peer: Int) -> ConnectionAction {
        guard case .running = lifecycle, peers[peer].open < limit, let next = peers[peer].waiting.popFirst() else { return .none }
        return create(for: next, peer: peer)
    }

    private mutating func create(for entry: Entry, peer: Int) -> ConnectionAction {
        let index: Int
        if let reused = freeSlots.popLast() {
            index = reused
            slots[index].peer = peer
            slots[index].state = .connecting(entry)
        } else {
            index = slots.count
            slots.append(Slot(generation: 0, peer: peer, state: .connecting(entry)))
        }
        peers[peer].open += 1
        return .create(ConnectionID(index: index, generation: slots[index].generation), host: peers[peer].host, port: peers[peer].port,
                       deadline: entry.deadline)
    }

    private mutating func freeSlot(_ index: Int) {
        if case .backingOff = slots[index].state { peers[slots[index].peer].backingOff -= 1 }
        peers[slots[index].peer].open -= 1
        slots[index].state = .free
        slots[index].generation &+= 1
        freeSlots.append(index)
    }
}
