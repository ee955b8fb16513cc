import CoreMetrics
import NIOCore
import NIOPosix
import VeneerCore

/// The NIO side of one event loop's upstream connections: feeds an
/// ``UpstreamPoolStateMachine`` the requests, the connections' outcomes and the sweeps'
/// ticks, and does what it says: opens and closes connections, sends requests on them,
/// answers callers, runs the sweeps.
///
/// Confined to its event loop (the transport reaches it through a `NIOLoopBoundBox`), so it
/// needs no lock. Deadlines are checked by one sweep every ``deadlineSweepInterval`` while
/// requests are held, rather than a timer per request: a timeout fires up to that much late,
/// and a request costs no timer to schedule and cancel. Idle connections are closed by a
/// slower sweep once they outstay the idle timeout.
final class UpstreamLoopPool {
    typealias StateMachine = UpstreamPoolStateMachine<UpstreamExchange, UpstreamConnectionHandler>

    static let deadlineSweepInterval = TimeAmount.milliseconds(25)
    static let idleSweepInterval = TimeAmount.seconds(5)

    let eventLoop: any EventLoop
    private let connectTimeout: TimeAmount
    private let metrics: UpstreamMetrics
    private var state: StateMachine
    private var deadlineSweep: Scheduled<Void>?
    private var idleSweep: Scheduled<Void>?
    /// The last request timeout made a `TimeAmount`: the requests of one origin share theirs,
    /// and the conversion (a 128-bit division) cost more than the rest of a deadline.
    private var lastTimeout = (Duration.zero, TimeAmount.zero)
    /// The backoff timers of failed connects, by the slot whose room they hold.
    private var backoffs: [StateMachine.ConnectionID: Scheduled<Void>] = [:]

    /// `limit` connections per peer; idle ones close after about `idleTimeout` (rounded up to
    /// the idle sweep's interval).
    init(eventLoop: any EventLoop, limit: Int, connectTimeout: TimeAmount, idleTimeout: TimeAmount, metrics: UpstreamMetrics = .none) {
        self.eventLoop = eventLoop
        self.connectTimeout = connectTimeout
        self.metrics = metrics
        let ticks = (idleTimeout.nanoseconds + Self.idleSweepInterval.nanoseconds - 1) / Self.idleSweepInterval.nanoseconds
        state = StateMachine(limit: limit, idleTicksBeforeClose: UInt64(max(1, ticks)))
    }

    // MARK: - From the transport

    /// Starts `exchange` for `waiter`: on an idle connection, a new one, or in the queue.
    func start(_ exchange: UpstreamExchange, _ waiter: UpstreamExchange.Waiter) {
        guard exchange.start(waiter) else { return }
        // Read in place: a copy of the request would retain and release each of its parts.
        let action = state.execute(exchange, host: exchange.request.endpoint.host, port: exchange.request.endpoint.port,
                                   deadline: .now() + amount(exchange.request.timeout), retryable: exchange.isIdempotent)
        // Neither run, nor a connection opened for it, nor failed: it waits in the queue.
        if case .none = action.connection, case .none = action.request { metrics.poolWaits.increment() }
        perform(action)
    }

    private func amount(_ timeout: Duration) -> TimeAmount {
        if timeout != lastTimeout.0 { lastTimeout = (timeout, TimeAmount(timeout)) }
        return lastTimeout.1
    }

    /// The caller's task was cancelled.
    func cancel(_ exchange: UpstreamExchange) {
        guard exchange.cancel() else { return }
        perform(state.cancel(exchange))
    }

    /// Fails what is held and closes every connection; completes when the open ones have closed.
    func shutdown() -> EventLoopFuture<Void> {
        deadlineSweep?.cancel()
        deadlineSweep = nil
        idleSweep?.cancel()
        idleSweep = nil
        for timer in backoffs.values { timer.cancel() }
        backoffs.removeAll()
        let sweep = state.shutdown()
        var closing: [EventLoopFuture<Void>] = []
        for connection in sweep.close {
            if let closed = connection.closeFuture { closing.append(closed) }
            connection.close()
        }
        for (exchange, failure, neverSent) in sweep.failed { exchange.fail(failure, neverSent: neverSent) }
        return EventLoopFuture.andAllComplete(closing, on: eventLoop)
    }

    // MARK: - From the connections

    func responseReceived(on id: StateMachine.ConnectionID, _ response: consuming ProxyResponse, keepAlive: Bool) {
        perform(state.responseReceived(on: id, keepAlive: keepAlive), answer: response)
    }

    /// The head of a streamed response: its caller gets it now; the connection stays taken.
    func responseHeadReceived(on id: StateMachine.ConnectionID, _ response: consuming ProxyResponse) {
        perform(state.responseHeadReceived(on: id), answer: response)
    }

    /// The streamed body on connection `id` ended (cut: `keepAlive` false, the connection closes).
    func bodyEnded(on id: StateMachine.ConnectionID, keepAlive: Bool) {
        perform(state.bodyEnded(on: id, keepAlive: keepAlive))
    }

    /// The request on connection `id` streams its body: its deadline waits until it is sent.
    func requestBodyStreams(on id: StateMachine.ConnectionID) {
        state.requestBodyStreams(on: id)
    }

    /// The streamed body on connection `id` has been sent: its answer's head is due by `deadline`.
    func requestBodySent(on id: StateMachine.ConnectionID, deadline: NIODeadline) {
        perform(state.requestBodySent(on: id, deadline: deadline))
    }

    func requestFailed(on id: StateMachine.ConnectionID, _ failure: UpstreamFailure) {
        perform(state.requestFailed(on: id, failure))
    }

    func closedBeforeResponse(on id: StateMachine.ConnectionID, requestSent: Bool) {
        let action = state.closedBeforeResponse(on: id, requestSent: requestSent)
        if let exchange = action.resent {
            metrics.retries.increment()
            // An attempt the upstream may have seen: the next is a span of its own (one that
            // never went out keeps its traceparent, which nobody saw).
            if requestSent { exchange.resend() }
        }
        perform(action)
    }

    // MARK: - Actions

    /// Timer, then connection, then request (see ``UpstreamPoolStateMachine/Action``), for an
    /// action that brings no answer. (Apart from the one that does: an absent answer passed
    /// along was still destroyed, through its type's metadata, at every action.)
    private func perform(_ action: StateMachine.Action) {
        performTimerAndConnection(action)
        switch action.request {
        case .none:
            break
        case .succeed:
            preconditionFailure("A request succeeds only with the response that arrived.")
        case .fail(let exchange, let failure, let neverSent):
            exchange.fail(failure, neverSent: neverSent)
        }
    }

    /// ``perform(_:)`` for an action that brings `answer`, which is handed on, not copied (a
    /// copy retains and releases each of its parts).
    private func perform(_ action: StateMachine.Action, answer: consuming ProxyResponse) {
        performTimerAndConnection(action)
        switch action.request {
        case .none:
            break
        case .succeed(let exchange):
            exchange.finish(answer)
        case .fail(let exchange, let failure, let neverSent):
            exchange.fail(failure, neverSent: neverSent)
        }
    }

    private func performTimerAndConnection(_ action: StateMachine.Action) {
        switch action.timer {
        case .none: break
        case .startDeadlineSweep: scheduleDeadlineSweep()
        case .startIdleSweep: scheduleIdleSweep()
        }
        switch action.connection {
        case .none:
            break
        case .run(let exchange, let connection):
            connection.start(exchange)
        case .create(let id, let host, let port, let deadline):
            connect(id, host: host, port: port, deadline: deadline)
        case .close(let connection):
            connection.close()
        case .backOff(let id, let delay):
            scheduleBackoff(id, delay)
        }
    }

    private func connect(_ id: StateMachine.ConnectionID, host: String, port: Int, deadline: NIODeadline) {
        let timeout = min(connectTimeout, max(deadline - .now(), .milliseconds(1)))
        ClientBootstrap(group: eventLoop)
            .connectTimeout(timeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(UpstreamConnectionHandler(id: id, eventLoop: channel.eventLoop))
                }
            }
            .connect(host: host, port: port)
            .assumeIsolated()
            .whenComplete { result in self.connected(id, result) }
    }

    private func connected(_ id: StateMachine.ConnectionID, _ result: Result<any Channel, any Error>) {
        switch result {
        case .success(let channel):
            guard let connection = try? channel.pipeline.syncOperations.handler(type: UpstreamConnectionHandler.self) else {
                channel.close(promise: nil)
                perform(state.connectionFailed(id, timedOut: false))
                return
            }
            connection.attach(to: self)
            channel.closeFuture.assumeIsolated().whenComplete { _ in
                self.perform(self.state.connectionClosed(id))
            }
            perform(state.connectionEstablished(id, connection))
        case .failure(let error):
            var timedOut = false
            if case ChannelError.connectTimeout? = error as? ChannelError { timedOut = true }
            (timedOut ? metrics.connectTimedOut : metrics.connectRefused).increment()
            perform(state.connectionFailed(id, timedOut: timedOut))
        }
    }

    /// Ends slot `id`'s backoff after `delay`, give or take 3% (AsyncHTTPClient's jitter: the
    /// loops' pools that failed together do not all try again at the same instant).
    private func scheduleBackoff(_ id: StateMachine.ConnectionID, _ delay: TimeAmount) {
        let jitter = delay.nanoseconds / 100 * 3
        let jittered = delay + .nanoseconds(Int64.random(in: -jitter...jitter))
        backoffs[id] = eventLoop.assumeIsolated().scheduleTask(in: jittered) {
            self.backoffs[id] = nil
            self.perform(self.state.backoffEnded(id))
        }
    }

    // MARK: - Sweeps

    private func scheduleDeadlineSweep() {
        deadlineSweep = eventLoop.assumeIsolated().scheduleTask(in: Self.deadlineSweepInterval) {
            self.sweepDeadlines()
        }
    }

    private func sweepDeadlines() {
        let sweep = state.deadlineTick(now: .now())
        for connection in sweep.close { connection.close() }
        for (exchange, failure, neverSent) in sweep.failed { exchange.fail(failure, neverSent: neverSent) }
        if sweep.keepTicking { scheduleDeadlineSweep() } else { deadlineSweep = nil }
    }

    private func scheduleIdleSweep() {
        idleSweep = eventLoop.assumeIsolated().scheduleTask(in: Self.idleSweepInterval) {
            self.sweepIdle()
        }
    }

    private func sweepIdle() {
        let sweep = state.idleTick()
        for connection in sweep.close { connection.close() }
        if sweep.keepTicking { scheduleIdleSweep() } else { idleSweep = nil }
    }
}
