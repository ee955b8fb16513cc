import NIOCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The accept side of one listening socket, as a pure value: whether it reads its accept
/// queue, how long it pauses after running out of descriptors, and how many accepted
/// connections are open against the `connections` limit.
///
/// Why a pause at all: `accept4` failing with EMFILE/ENFILE leaves the connection in the
/// kernel's queue, so the level-triggered listening socket stays readable and every loop
/// iteration fails again. NIO's `AcceptBackoffHandler` cannot stop that (it delays the next
/// `read()`, but after a failed accept NIO still has a read pending and asks for none), so the
/// pause is taken by turning `autoRead` off, the one switch that drops the read interest.
struct AcceptStateMachine: Sendable {
    /// How long reading the accept queue pauses: from `minimum`, doubling while accepts keep
    /// failing, at most `maximum`.
    struct Backoff: Sendable, Equatable {
        /// The first pause of an episode.
        var minimum: TimeAmount
        /// The longest pause; also the longest a freed descriptor waits before it is used.
        var maximum: TimeAmount

        /// 10 ms, doubling to 500 ms (nginx pauses accepts 500 ms on EMFILE): a freed
        /// descriptor is used within half a second, and a process held at its descriptor limit
        /// wakes twice a second per listener, which costs nothing measurable.
        static let standard = Backoff(minimum: .milliseconds(10), maximum: .milliseconds(500))

        /// A backoff from `minimum` to `maximum`.
        init(minimum: TimeAmount, maximum: TimeAmount) {
            precondition(minimum > .zero && maximum >= minimum, "backoff needs 0 < minimum <= maximum")
            self.minimum = minimum
            self.maximum = maximum
        }
    }

    /// Where the listening socket is.
    enum State: Sendable, Equatable {
        /// Reading the accept queue normally.
        case accepting
        /// Not reading the accept queue; a retry is scheduled after `pause`.
        case paused(pause: TimeAmount)
        /// Reading again after a pause of `lastPause`, no accept has succeeded yet: a
        /// failure now pauses twice as long.
        case retrying(lastPause: TimeAmount)
        /// The listening socket is closed; nothing is scheduled.
        case closed
    }

    /// What an accept error asks of the handler.
    enum FailureAction: Sendable, Equatable {
        /// Stop reading (autoRead off), retry after `retryAfter`; `episodeBegins` is true for
        /// the first failure after normal accepting (the one worth a log line).
        case pause(retryAfter: TimeAmount, episodeBegins: Bool)
        /// Not an error a pause helps with: pass it on.
        case forward
        /// Nothing to do (already paused, or closed): drop it.
        case ignore
    }

    /// What to do with a connection the socket just accepted.
    enum AcceptAction: Sendable, Equatable {
        /// Pass it on to be served; it now counts as open.
        case admit
        /// The `connections` limit is reached: close it at once, so the client learns now
        /// instead of waiting in the queue.
        case refuse
    }

    /// What a due retry asks of the handler.
    enum RetryAction: Sendable, Equatable {
        /// Read again (autoRead on).
        case resume
        /// The socket closed meanwhile: nothing.
        case ignore
    }

    /// Whether an outbound `read()` reaches the socket.
    enum ReadAction: Sendable, Equatable {
        /// Let it through.
        case read
        /// Hold it: a read now would register interest again and spin on the same error.
        case hold
    }

    /// Why an accept failed, as far as the machine cares.
    enum AcceptFailure: Sendable, Equatable {
        /// The process or system is out of a resource a new socket needs (EMFILE, ENFILE,
        /// ENOBUFS, ENOMEM): the connection stays queued and the next accept fails the same way.
        case outOfResources
        /// Anything else (ECONNABORTED, not an I/O error): not ours to handle.
        case other

        /// Classifies an error caught on a server channel.
        init(_ error: any Error) {
            guard let io = error as? IOError else {
                self = .other
                return
            }
            switch io.errnoCode {
            case EMFILE, ENFILE, ENOBUFS, ENOMEM: self = .outOfResources
            default: self = .other
            }
        }
    }

    /// Where the socket is.
    private(set) var state: State = .accepting
    /// Accepted connections that are still open.
    private(set) var open = 0
    /// The most connections open at once; beyond it new ones are closed at once.
    let limit: Int
    /// The pause after out-of-descriptor failures.
    let backoff: Backoff

    /// A machine that admits up to `limit` connections and pauses by `backoff`.
    init(limit: Int, backoff: Backoff = .standard) {
        precondition(limit > 0, "connections must be at least 1")
        self.limit = limit
        self.backoff = backoff
    }

    /// An accept failed with `failure`.
    mutating func acceptFailed(_ failure: AcceptFailure) -> FailureAction {
        guard failure == .outOfResources else { return .forward }
        switch state {
        case .accepting:
            state = .paused(pause: backoff.minimum)
            return .pause(retryAfter: backoff.minimum, episodeBegins: true)
        case .retrying(let lastPause):
            let pause = min(lastPause * 2, backoff.maximum)
            state = .paused(pause: pause)
            return .pause(retryAfter: pause, episodeBegins: false)
        case .paused, .closed:
            // Reads are held while paused, so a failure here is a late one from the same read.
            return .ignore
        }
    }

    /// The socket accepted a connection.
    mutating func accepted() -> AcceptAction {
        if case .retrying = state {
            // A descriptor was free: the episode is over, the next failure starts small again.
            state = .accepting
        }
        guard open < limit else { return .refuse }
        open += 1
        return .admit
    }

    /// An admitted connection closed.
    mutating func connectionClosed() {
        precondition(open > 0, "a connection closed that was never admitted")
        open -= 1
    }

    /// The scheduled retry is due.
    mutating func retryDue() -> RetryAction {
        guard case .paused(let pause) = state else { return .ignore }
        state = .retrying(lastPause: pause)
        return .resume
    }

    /// Something asks the socket to read.
    func readRequested() -> ReadAction {
        if case .paused = state { return .hold }
        return .read
    }

    /// The listening socket closed.
    mutating func closed() {
        state = .closed
    }
}
