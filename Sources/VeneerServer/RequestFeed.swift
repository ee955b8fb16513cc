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
        /// Who sent it, as the kernel says, when known.
        public let peer: PeerIdentity?
        /// Its rendering for the streams, made by the first that sends it (only while someone
        /// watches: no allocation per request otherwise).
        let rendering: Rendering?

        /// What `render` makes of the item; with several streams open, made once for all.
        public func rendered(_ render: (Item) -> ByteBuffer) -> ByteBuffer {
            guard let rendering else { return render(self) }
            return rendering.value { render(self) }
        }

        /// The target without its query (`?…` when there was one): ``RequestRedaction``'s
        /// rule for request lists.
        public var path: String { RequestRedaction.path(ofTarget: target) }

        /// The item as JSON, the way `/-/status` lists it and `/-/events` sends it.
        public var json: JSONValue {
            var members: [(String, JSONValue)] = [
                ("sequence", .int(sequence)), ("time", .string(Timestamp.iso8601(time))), ("method", .string(method.rawValue)),
                ("path", .string(path)), ("status", .int(status)),
                ("duration_ms", .number(RequestFeed.milliseconds(duration))),
            ]
            if let requestID { members.append(("request_id", .string(requestID))) }
            if let peer {
                var fields: [(String, JSONValue)] = [("uid", .int(Int(peer.uid)))]
                if let pid = peer.pid { fields.append(("pid", .int(Int(pid)))) }
                if let unit = peer.unit { fields.append(("unit", .string(unit))) }
                members.append(("peer", .object(fields)))
            }
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

    /// An item's bytes for the streams, made once.
    final class Rendering: Sendable {
        private let bytes = Mutex<ByteBuffer?>(nil)

        func value(_ render: () -> ByteBuffer) -> ByteBuffer {
            bytes.withLock { bytes in
                if let made = bytes { return made }
                let made = render()
                bytes = made
                return made
            }
        }
    }

    private struct State {
        var ring: [Item?]
        var next = 0
        var sequence = 0
    }

    /// How many it keeps.
    public let capacity: Int
    /// The last 15 minutes of answers, for the page's charts.
    public let history = TrafficHistory()
    private let state: Mutex<State>
    /// How many watches are open: read without a lock by every connection, per request.
    fileprivate let watchCount = Atomic<Int>(0)

    /// A feed keeping the last `capacity` requests.
    public init(capacity: Int = 100) {
        self.capacity = capacity
        state = Mutex(State(ring: Array(repeating: nil, count: capacity)))
    }

    /// Adds a request answered at `answered` (from the connection's event loop), its answer's
    /// `headers` (for the request id).
    public func add(answered: NIODeadline = .now(), method: HTTPRequest.Method, target: String, status: Int, duration: Duration,
                    headers: ProxyHeaders = ProxyHeaders(), record: RequestRecord?, peer: PeerIdentity? = nil) {
        keep(answered: answered, method: method, target: target, status: status, duration: duration, headers: headers, record: record, peer: peer)
        history.record(answered: answered, duration: duration, cacheStatus: record?.cacheStatus)
    }

    /// ``add(answered:method:target:status:duration:headers:record:peer:)`` with the duration
    /// in nanoseconds, as the edge measures it (the history's bin is found without taking a
    /// `Duration` apart).
    func add(answered: NIODeadline, method: HTTPRequest.Method, target: String, status: Int, nanoseconds: Int64,
             headers: ProxyHeaders, record: RequestRecord?, peer: PeerIdentity?) {
        keep(answered: answered, method: method, target: target, status: status, duration: .nanoseconds(nanoseconds), headers: headers,
             record: record, peer: peer)
        history.record(answered: answered, nanoseconds: nanoseconds, cacheStatus: record?.cacheStatus)
    }

    private func keep(answered: NIODeadline, method: HTTPRequest.Method, target: String, status: Int, duration: Duration,
                      headers: ProxyHeaders, record: RequestRecord?, peer: PeerIdentity?) {
        state.withLock { state in
            state.sequence += 1
            state.ring[state.next] = Item(sequence: state.sequence, answered: answered, method: method, target: target, status: status,
                                          duration: duration, headers: headers, record: record, peer: peer,
                                          rendering: watchCount.load(ordering: .relaxed) > 0 ? Rendering() : nil)
            state.next = (state.next + 1) % capacity
        }
    }

    /// The requests kept, oldest first; only those after `sequence` when given. A stream
    /// reads what is new this way a few times a second: what a request costs does not grow
    /// with the streams open, and each stream writes once per batch, not once per request.
    public func recent(after sequence: Int? = nil) -> [Item] {
        state.withLock { state in
            let ordered = (state.ring[state.next...] + state.ring[..<state.next]).compactMap { $0 }
            guard let sequence else { return ordered }
            return ordered.filter { $0.sequence > sequence }
        }
    }

    /// The newest sequence number given (0 before the first request).
    public var lastSequence: Int { state.withLock { $0.sequence } }

    /// Someone watches the feed (a `/-/events` stream) until the watch is dropped: meanwhile
    /// requests note every decorator's entry for it (see ``watches``).
    public func watch() -> Watch {
        watchCount.add(1, ordering: .relaxed)
        return Watch(feed: self)
    }

    /// A watch of the feed; it ends when it is released.
    public final class Watch: Sendable {
        let feed: RequestFeed
        init(feed: RequestFeed) { self.feed = feed }
        deinit { feed.watchCount.subtract(1, ordering: .relaxed) }
    }

    /// How many watches are open.
    public var watches: Int { watchCount.load(ordering: .relaxed) }
}
