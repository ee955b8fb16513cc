import CoreMetrics
import HTTPTypes
import Synchronization

/// What the listeners count: every request answered, refusals included
/// (`veneer_http_requests_total{route,method,status}`), the requests read and not yet
/// answered (`veneer_http_requests_in_flight`), and the answers to callers the kernel named
/// by their systemd unit (`veneer_http_requests_by_unit_total{unit}`: Unix sockets and
/// `peer_identity`; at most ``maxUnits`` units, the rest `other`, no unit `none`).
///
/// Labels stay bounded whatever clients send: the route is the template the edge matched
/// (`/posts/{id}`), `/-/` for the admin API and `unmatched` for anything else; a method
/// outside the standard ones is `_OTHER` (as OpenTelemetry names it).
public final class EdgeMetrics: Sendable {
    private struct Key: Hashable {
        let route: String
        let method: String
        let status: Int
    }

    private let factory: any MetricsFactory
    private let counters = Mutex<[Key: Counter]>([:])
    private let unitCounters = Mutex<[String: Counter]>([:])
    /// How many units get a label of their own: the callers of a machine are its services,
    /// and a caller cannot make up a unit, but a host may run many (one scope per login).
    static let maxUnits = 32
    private let inFlight: Meter

    /// The edge's metrics, created through `factory`.
    public init(factory: any MetricsFactory) {
        self.factory = factory
        inFlight = Meter(label: "veneer_http_requests_in_flight", dimensions: [], factory: factory)
        inFlight.set(0)
    }

    /// A request read whole is being answered.
    func started() {
        inFlight.increment()
    }

    /// A request started with ``started()`` was answered (or its client left).
    func finished() {
        inFlight.decrement()
    }

    /// Counts an answer written: `route` nil when the path named no route.
    func count(route: String?, method: HTTPRequest.Method?, status: Int) {
        counter(route: route, method: method, status: status).increment()
    }

    /// The counter of answers with this route, method and status: a connection keeps the
    /// last one it used, since its requests are mostly alike, and skips this lookup (a lock
    /// every connection takes) while they are.
    func counter(route: String?, method: HTTPRequest.Method?, status: Int) -> Counter {
        let key = Key(route: route ?? "unmatched", method: Self.label(method), status: status)
        return counters.withLock { counters in
            if let existing = counters[key] { return existing }
            let made = Counter(label: "veneer_http_requests_total",
                               dimensions: [("route", key.route), ("method", key.method), ("status", String(status))], factory: factory)
            counters[key] = made
            return made
        }
    }

    /// The counter of answers to callers of `unit` (nil: a caller without one): asked once per
    /// connection.
    func unitCounter(_ unit: String?) -> Counter {
        unitCounters.withLock { counters in
            var label = unit ?? "none"
            if let existing = counters[label] { return existing }
            if unit != nil, counters.count >= Self.maxUnits { label = "other" }
            if let existing = counters[label] { return existing }
            let made = Counter(label: "veneer_http_requests_by_unit_total", dimensions: [("unit", label)], factory: factory)
            counters[label] = made
            return made
        }
    }

    /// The method's label: its name when standard, `_OTHER` otherwise, `none` without a request line.
    static func label(_ method: HTTPRequest.Method?) -> String {
        guard let method else { return "none" }
        switch method {
        case .get, .head, .post, .put, .patch, .delete, .options, .connect, .trace: return method.rawValue
        default: return "_OTHER"
        }
    }
}
