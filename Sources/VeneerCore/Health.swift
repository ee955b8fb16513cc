import Synchronization

/// The health of the running daemon as its components report it: `/-/health` answers 503
/// `degraded` while any component says it is degraded, with every reason.
public final class HealthBoard: Sendable {
    /// One component's report.
    public enum Status: Sendable, Equatable {
        /// Working.
        case ok
        /// Working badly or not at all, with a reason for the operator.
        case degraded(String)
    }

    private let reports = Mutex<[String: Status]>([:])

    /// An empty board (healthy).
    public init() {}

    /// Sets the status of `component` (a stable name such as `auth_refresh`).
    public func report(_ component: String, _ status: Status) {
        reports.withLock { $0[component] = status }
    }

    /// Forgets a component (when it leaves the chain).
    public func remove(_ component: String) {
        _ = reports.withLock { $0.removeValue(forKey: component) }
    }

    /// Every component's status, sorted by component name.
    public var all: [(component: String, status: Status)] {
        reports.withLock { reports in reports.keys.sorted().map { ($0, reports[$0]!) } }
    }

    /// The reasons of the degraded components.
    public var problems: [String] {
        all.compactMap { entry in
            if case .degraded(let reason) = entry.status { return "\(entry.component): \(reason)" }
            return nil
        }
    }
}
