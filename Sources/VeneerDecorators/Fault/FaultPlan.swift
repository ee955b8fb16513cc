import HTTPTypes
import VeneerConfig
import VeneerCore

extension HTTPField.Name {
    /// `Veneer-Fault`: a fault asked for by a loopback client, when `fault` allows it.
    public static let veneerFault = HTTPField.Name("Veneer-Fault")!
}

/// What `fault` does to one request: wait, then fail or pass it on.
public struct FaultPlan: Sendable, Equatable {
    /// How long to hold the request first.
    public var delay: Duration?
    /// How to fail it after the delay; nil passes it on.
    public var abort: FaultOptions.Abort?

    /// Creates a plan.
    public init(delay: Duration? = nil, abort: FaultOptions.Abort? = nil) {
        self.delay = delay
        self.abort = abort
    }

    /// A `Veneer-Fault` header's plan: comma-separated `status=503`, `delay=2s` and `drop`.
    /// Anything else is refused (400), so that a typo is not mistaken for a healthy upstream.
    public init(header: String) throws(ProxyError) {
        for part in header.split(separator: ",") {
            let item = part.trimmingSpaces
            if item == "drop" {
                abort = .drop
                continue
            }
            let pair = item.split(separator: "=", maxSplits: 1)
            guard pair.count == 2 else { throw Self.malformed(header) }
            let value = String(pair[1].trimmingSpaces)
            switch pair[0].trimmingSpaces {
            case "status":
                guard let code = Self.statusBounds.value(value) else { throw Self.malformed(header) }
                abort = .status(code)
            case "delay":
                // Bounded: any local caller may send the header, and a delay holds a request
                // (and its connection) that long.
                guard let duration = Self.delayBounds.value(value) else { throw Self.malformed(header) }
                delay = duration
            default:
                throw Self.malformed(header)
            }
        }
        if delay == nil, abort == nil { throw Self.malformed(header) }
    }

    /// The delays a `Veneer-Fault` header may ask for: at most a minute.
    public static let delayBounds = Bounded<Durations>(.zero ... .seconds(60))
    /// The statuses a `Veneer-Fault` header may ask for.
    public static let statusBounds = Bounded<Counts>(400...599)

    static func malformed(_ header: String) -> ProxyError {
        .badRequest("Veneer-Fault takes status=400..599, delay=DURATION (at most 60s) and drop, separated by commas.")
    }
}
