import Synchronization

/// What happened to one request inside the chain, owned by the server edge (one per
/// request, made with its ``ProxyRequest``) and never part of a response, so never stored.
///
/// Decorators note what they did: the cache its status, the origin the time it spent, any
/// other decorator an ``Entry``. The edge reads the record once the request is answered (for
/// an access log, `Server-Timing`). The cache and the origin, which act on nearly every
/// request, have fields of their own, so that the record stays one allocation.
public final class RequestRecord: Sendable {
    /// One decorator's note.
    public struct Entry: Sendable, Equatable {
        /// Who acted (`cache`, `upstream`, a decorator's name).
        public let name: String
        /// What it did, in a few words.
        public let detail: String
        /// How long it took, if it measured that.
        public let duration: Duration?

        /// A note.
        public init(name: String, detail: String, duration: Duration? = nil) {
            self.name = name
            self.detail = detail
            self.duration = duration
        }
    }

    private struct State {
        var route: String?
        var cacheStatus: String?
        var originTime: Duration?
        var originExchanges = 0
        var entries: [Entry] = []
    }

    private let state = Mutex(State())

    /// An empty record.
    public init() {}

    /// Notes the route template the edge matched (for the access log and the edge's metrics).
    public func noteRoute(_ template: String) {
        state.withLock { $0.route = template }
    }

    /// The route template the edge matched, if the path named one.
    public var route: String? { state.withLock { $0.route } }

    /// Notes the cache's status for the request (the `Cache-Status` it answered with); the
    /// last one noted counts (with two caches, the outer one's).
    public func noteCacheStatus(_ status: String) {
        state.withLock { $0.cacheStatus = status }
    }

    /// Adds time the origin spent answering (a retried request asks it more than once).
    public func noteOriginTime(_ duration: Duration) {
        state.withLock { state in
            state.originTime = (state.originTime ?? .zero) + duration
            state.originExchanges += 1
        }
    }

    /// Adds a decorator's note.
    public func append(_ entry: Entry) {
        state.withLock { $0.entries.append(entry) }
    }

    /// The cache's status, if a cache answered or passed the request on.
    public var cacheStatus: String? { state.withLock { $0.cacheStatus } }

    /// The time the origin spent, if the request reached it.
    public var originTime: Duration? { state.withLock { $0.originTime } }

    /// One entry per decorator that acted: the cache (its status), the origin (its time, and
    /// how many exchanges), then the notes of the others in the order they were added.
    public var entries: [Entry] {
        state.withLock { state in
            var entries: [Entry] = []
            if let status = state.cacheStatus { entries.append(Entry(name: "cache", detail: status)) }
            if let time = state.originTime {
                entries.append(Entry(name: "origin", detail: state.originExchanges == 1 ? "1 exchange" : "\(state.originExchanges) exchanges",
                                     duration: time))
            }
            return entries + state.entries
        }
    }
}
