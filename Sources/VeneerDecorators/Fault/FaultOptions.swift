import HTTPTypes
import VeneerConfig
import VeneerCore

/// Options of `fault`, decoded once.
public struct FaultOptions: Sendable, Hashable {
    /// How an aborted request fails.
    public enum Abort: Sendable, Hashable, CustomStringConvertible {
        /// Answer with this status, as if the upstream had.
        case status(Int)
        /// Fail exactly as the upstream origin does when the upstream closes before answering.
        case drop

        /// `503` or `drop`.
        public var description: String {
            switch self {
            case .status(let code): return String(code)
            case .drop: return "drop"
            }
        }
    }

    /// Which requests a rule applies to, and how often.
    public struct Scope: Sendable, Hashable {
        /// The share of matching requests it applies to, 0...100.
        public var percent: Double = 100
        /// Only these routes (all when empty).
        public var routes: [RoutePattern] = []
        /// Only these methods (all when empty).
        public var methods: Set<String> = []

        /// Creates a scope.
        public init(percent: Double = 100, routes: [RoutePattern] = [], methods: Set<String> = []) {
            self.percent = percent
            self.routes = routes
            self.methods = methods
        }

        func matches(_ request: ProxyRequest) -> Bool {
            (methods.isEmpty || methods.contains(request.method.rawValue))
                && (routes.isEmpty || routes.contains { $0.matches(request.route) })
        }
    }

    /// A delay: fixed when both bounds are equal, else drawn evenly from the range.
    public struct Delay: Sendable, Hashable {
        /// The shortest delay.
        public var minimum: Duration
        /// The longest delay.
        public var maximum: Duration
        /// Which requests, how often.
        public var scope: Scope

        /// Creates a delay.
        public init(minimum: Duration, maximum: Duration? = nil, scope: Scope = Scope()) {
            self.minimum = minimum
            self.maximum = maximum ?? minimum
            self.scope = scope
        }
    }

    /// An abort rule.
    public struct AbortRule: Sendable, Hashable {
        /// How the request fails.
        public var abort: Abort
        /// Which requests, how often.
        public var scope: Scope

        /// Creates an abort rule.
        public init(_ abort: Abort, scope: Scope = Scope()) {
            self.abort = abort
            self.scope = scope
        }
    }

    /// The abort rule, if any.
    public var abort: AbortRule?
    /// The delay rule, if any.
    public var delay: Delay?
    /// The seed of the random draws; nil: a different sequence every start.
    public var seed: UInt64?
    /// Whether loopback clients may ask for a fault with the `Veneer-Fault` request header.
    public var allowHeader: Bool

    /// Creates options.
    public init(abort: AbortRule? = nil, delay: Delay? = nil, seed: UInt64? = nil, allowHeader: Bool = false) {
        self.abort = abort
        self.delay = delay
        self.seed = seed
        self.allowHeader = allowHeader
    }

    static let docs: [OptionDoc] = [
        OptionDoc("abort", "rule", default: "none",
                  "fail requests: {status: 503 | drop, percent: 100, routes: [...], methods: [...]}; drop fails like an upstream that closes without answering"),
        OptionDoc("delay", "rule", default: "none",
                  "hold requests before passing them on: {duration: 2s | [100ms, 2s], percent: 100, routes: [...], methods: [...]}"),
        OptionDoc("seed", "integer", default: "random", "seed of the percentage and range draws, for reproducible runs"),
        OptionDoc("allow_header", "bool", default: "false", "let loopback clients ask for a fault per request: Veneer-Fault: status=503 | delay=2s | drop"),
    ]

    static let methodNames = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]
    /// A configured delay holds a request (and its connection) that long: at most an hour.
    static let delayBounds = Bounded<Durations>(.zero ... .seconds(3600))


    static func decode(_ mapping: ConfigMapping, site: ChainSite) -> FaultOptions? {
        var options = FaultOptions()
        if let abort = mapping.mapping("abort", allowedKeys: ["status", "percent", "routes", "methods"]) {
            let status = abort.required("status").flatMap { value -> Abort? in
                guard let text = value.scalarText("a status or drop") else { return nil }
                if text == "drop" { return .drop }
                guard case .malformed = Counts.read(text.trimmingSpaces) else { return value.int(in: 400...599).map(Abort.status) }
                value.error("\"\(text)\" is not a status from 400 to 599 or drop")
                return nil
            }
            let scope = decodeScope(abort)
            if let status {
                abort.note("status", .string(status.description))
                options.abort = AbortRule(status, scope: scope)
            }
            mapping.note("abort", JSONValue.object(abort.summary.map { ($0.0, $0.1) }))
        }
        if let delay = mapping.mapping("delay", allowedKeys: ["duration", "percent", "routes", "methods"]) {
            var bounds: (Duration, Duration)?
            if let value = delay.required("duration") {
                if case .sequence = value.node {
                    let items = value.list() ?? []
                    if items.count == 2, let low = items[0].duration(in: Self.delayBounds), let high = items[1].duration(in: Self.delayBounds) {
                        if low <= high { bounds = (low, high) } else { value.error("the range must go from the shorter to the longer delay") }
                    } else if items.count != 2 {
                        value.error("a range is two durations, e.g. [100ms, 2s]")
                    }
                } else if let fixed = value.duration(in: Self.delayBounds) {
                    bounds = (fixed, fixed)
                }
            }
            let scope = decodeScope(delay)
            if let bounds {
                delay.note("duration", bounds.0 == bounds.1 ? .string(Units.format(bounds.0))
                    : .array([.string(Units.format(bounds.0)), .string(Units.format(bounds.1))]))
                options.delay = Delay(minimum: bounds.0, maximum: bounds.1, scope: scope)
            }
            mapping.note("delay", JSONValue.object(delay.summary.map { ($0.0, $0.1) }))
        }
        if let value = mapping["seed"] {
            if let text = value.scalarText("an integer") {
                if let seed = UInt64(text.trimmingSpaces) {
                    options.seed = seed
                    mapping.note("seed", .number(String(seed)))
                } else {
                    value.error("must be a whole number from 0 to \(UInt64.max)")
                }
            }
        }
        options.allowHeader = mapping.bool("allow_header", default: false)
        if options.abort == nil, options.delay == nil, !options.allowHeader, !mapping.contains("abort"), !mapping.contains("delay") {
            mapping.error("give abort, delay or allow_header: true (else fault does nothing)")
        }
        return options
    }

    static func decodeScope(_ mapping: ConfigMapping) -> Scope {
        var scope = Scope()
        if let percent = mapping["percent"]?.percentage(in: .init(0...100)) { scope.percent = percent }
        mapping.note("percent", .number(Percentages.format(scope.percent)))
        for item in mapping["methods"]?.list() ?? [] {
            guard let method = item.string()?.uppercased() else { continue }
            if methodNames.contains(method) { scope.methods.insert(method) } else {
                item.error("\"\(method)\" is not one of \(methodNames.joined(separator: ", "))")
            }
        }
        if !scope.methods.isEmpty { mapping.note("methods", .array(scope.methods.sorted().map(JSONValue.string))) }
        for item in mapping["routes"]?.list() ?? [] {
            guard let text = item.string() else { continue }
            if let route = RoutePattern(text) { scope.routes.append(route) } else {
                item.error("\"\(text)\" is not a route (/posts, /posts/{id} or /posts/13)")
            }
        }
        if !scope.routes.isEmpty { mapping.note("routes", .array(scope.routes.map { .string($0.description) })) }
        return scope
    }
}
