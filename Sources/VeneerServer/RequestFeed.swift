import Foundation
import HTTPTypes
import NIOCore
import Synchronization
import VeneerCore

/// The last requests the chain answered, for the status page: the page shows them when it
/// loads and `GET /-/events` streams each new one as it is answered (server-sent events).
///
/// Kept cheap for the edge, which adds to it on every answer: a fixed ring of slots (no
/// allocation per request), one short lock, and the request's ``RequestRecord`` kept by
/// reference, its notes read only when someone looks. Admin requests are not added (the
/// page's own would crowd out everything else).
public final class RequestFeed: Sendable {
    /// One request as the page shows it.
    public struct Item: Sendable {
        /// Increases by one per request, from 1: a stream's `id:` (a reconnecting
        /// `EventSource` sends the last one it saw as `Last-Event-ID`).
        public let sequence: Int
        /// When it was answered, on the monotonic clock the connection read (no clock read of its own).
        let answered: NIODeadline
        /// When it was answered.
        public var time: Date { RequestFeed.wallClock(answered) }
        /// The method.
        public let method: HTTPRequest.Method
        /// The request target as sent (the page shows its path only: a query may carry secrets).
        public let target: String
        /// The answer's status.
        public let status: Int
        /// From the request read whole to its answer written.
        public let duration: Duration
        /// The answer's headers, kept by reference: the request id is read from them only
        /// when the item is shown.
        let headers: ProxyHeaders
        /// The request id.
        public var requestID: String? { headers[.xRequestID] }
        /// What the chain's decorators noted (read when shown).
        public let record: RequestRecord?

        /// The target without its query (`?…` when there was one).
        public var path: String {
            guard let question = target.firstIndex(of: "?") else { return target }
            return target[..<question] + "?…"
        }

        /// The item as JSON, the way `/-/status` lists it and `/-/events` sends it.
        public var json: JSONValue {
            var members: [(String, JSONValue)] = [
                ("sequence", .int(sequence)), ("time", .string(Timestamp.iso8601(time))), ("method", .string(method.rawValue)),
                ("path", .string(path)), ("status", .int(status)),
                ("duration_ms", .number(RequestFeed.milliseconds(duration))),
            ]
            if let requestID { members.append(("request_id", .string(requestID))) }
            if let record {
                members.append(("entries", .array(record.entries.map { entry in
                    var fields: [(String, JSONValue)] = [("name", .string(entry.name)), ("detail", .string(entry.detail))]
                    if let duration = entry.duration {
                        fields.append(("duration_ms", .number(RequestFeed.milliseconds(duration))))
                    }
                    return .object(fields)
                })))
            }
            return .object(members)
        }
    }

    /// The wall-clock time of a monotonic instant, against one pair of readings taken once.
    static func wallClock(_ instant: NIODeadline) -> Date {
        let (wall, monotonic) = clockPair
        return wall.addingTimeInterval(Double((instant - monotonic).nanoseconds) / 1e9)
    }

    private static let clockPair = (Date(), NIODeadline.now())

    /// `duration` in milliseconds with one decimal (`12.3`).
    public static func milliseconds(_ duration: Duration) -> String {
        String(format: "%.1f", Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15)
    }

    private struct State {
        var ring: [Item?]
        var next = 0
        var sequence = 0
        var subscribers: [Int: AsyncStream<Item>.Continuation] = [:]
        var nextSubscriber = 0
    }

    /// How many it keeps.
    public let capacity: Int
    private let state: Mutex<State>
    /// Whether anyone streams: checked without the lock by ``add``'s caller's fast path.
    private let subscriberCount = Atomic<Int>(0)

    /// A feed keeping the last `capacity` requests.
    public init(capacity: Int = 100) {
        self.capacity = capacity
        state = Mutex(State(ring: Array(repeating: nil, count: capacity)))
    }

    /// Adds a request answered at `answered` (from the connection's event loop), its answer's
    /// `headers` (for the request id).
    public func add(answered: NIODeadline = .now(), method: HTTPRequest.Method, target: String, status: Int, duration: Duration,
                    headers: ProxyHeaders = ProxyHeaders(), record: RequestRecord?) {
        let (item, subscribers) = state.withLock { state -> (Item, [AsyncStream<Item>.Continuation]) in
            state.sequence += 1
            let item = Item(sequence: state.sequence, answered: answered, method: method, target: target, status: status, duration: duration,
                            headers: headers, record: record)
            state.ring[state.next] = item
            state.next = (state.next + 1) % capacity
            return (item, state.subscribers.isEmpty ? [] : Array(state.subscribers.values))
        }
        for subscriber in subscribers { subscriber.yield(item) }
    }

    /// The requests kept, oldest first; only those after `sequence` when given.
    public func recent(after sequence: Int? = nil) -> [Item] {
        state.withLock { state in
            let ordered = (state.ring[state.next...] + state.ring[..<state.next]).compactMap { $0 }
            guard let sequence else { return ordered }
            return ordered.filter { $0.sequence > sequence }
        }
    }

    /// The requests kept after `sequence` (all when nil), and every later one as it comes,
    /// with nothing missed or repeated in between. Ending the stream unsubscribes. A
    /// subscriber that falls behind loses the oldest of what it has not read (at most
    /// `capacity` wait).
    public func subscribe(after sequence: Int?) -> (backlog: [Item], stream: AsyncStream<Item>) {
        let (stream, continuation) = AsyncStream<Item>.makeStream(bufferingPolicy: .bufferingNewest(capacity))
        let (backlog, id) = state.withLock { state -> ([Item], Int) in
            let ordered = (state.ring[state.next...] + state.ring[..<state.next]).compactMap { $0 }
            let id = state.nextSubscriber
            state.nextSubscriber += 1
            state.subscribers[id] = continuation
            return (sequence.map { after in ordered.filter { $0.sequence > after } } ?? ordered, id)
        }
        subscriberCount.add(1, ordering: .relaxed)
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            self.state.withLock { _ = $0.subscribers.removeValue(forKey: id) }
            self.subscriberCount.subtract(1, ordering: .relaxed)
        }
        return (backlog, stream)
    }

    /// How many streams are subscribed.
    public var subscribers: Int { subscriberCount.load(ordering: .relaxed) }
}
