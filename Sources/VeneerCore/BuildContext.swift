import CoreMetrics
import HTTPTypes
import Logging

/// Everything a factory may use to build an origin or a decorator. Nothing global: the
/// clock, the logger, the metrics and the transports come in here, so tests inject theirs.
public struct BuildContext: Sendable {
    /// The logger (`veneer.<module>` labels are derived from it).
    public var logger: Logger
    /// Time.
    public var clock: any VeneerClock
    /// Where metrics are created (Prometheus in the daemon).
    public var metrics: any MetricsFactory
    /// Outbound HTTP.
    public var transports: any TransportProvider
    /// Where persistent state lives by default.
    public var stateDirectory: String
    /// The collections the environment exposes.
    public var resources: [Resource]
    /// Size limits of the environment.
    public var limits: BuildLimits
    /// State that outlives one chain: what a reload carries over.
    public var carried: CarriedState
    /// Where components report degraded health.
    public var health: HealthBoard
    /// The named stores of the configuration.
    public var stores: any StoreProvider
    /// Admin routes the chain's decorators add under `/-/`.
    public var admin: AdminRoutes
    /// Forwarding headers the edge passes on from callers (`pass_forwarding_headers`; every
    /// other is stripped): an origin may reflect them, so a cache keys on them.
    public var passedForwardingHeaders: [HTTPField.Name] = []
    /// The chain entry being built (set by the chain builder for each factory it calls): the
    /// owner of the state ``entryKey(_:)`` names.
    public var entry: ChainEntryIdentity = .unplaced
    /// The entries inside the one being built, innermost last (the origin): what its answers
    /// come from. A cache keeps its entries across a reload or a switch only while what
    /// fills it is the same.
    public var inside: [ChainEntryIdentity] = []
    /// The name of the environment being built ("" for chains built by hand): auth_refresh
    /// tells an operator's new refresh token from another environment's by it.
    public var environment = ""
    /// Request fields that address a decorator rather than the upstream (a fault decorator's
    /// `Veneer-Fault`), as the registry's decorators declare them: no origin passes them on,
    /// and a request that carries one gets an answer of its own (a cache shares none with it).
    public var requestDirectives: [HTTPField.Name] = []
    /// Where a handler starts work that outlives a request (a cache's background refresh): the
    /// runtime's drain waits for it. Chains built by hand run it in tasks nobody waits for.
    public var backgroundWork: any BackgroundWork = DetachedWork()
    /// The instance's budget for what is buffered whole (`limits.buffered`): a decorator that
    /// reads a streamed body whole reserves it there (``ProxyResponse/collected(upTo:budget:)``).
    public var buffers: BufferBudget = .unbounded
    /// Where the spans of work no request waits for go (a token refresh ahead of expiry, a
    /// cache's background refresh): the instance's span exporter (`telemetry`); nil when it is off.
    public var spans: (any SpanSink)?

    /// Creates a context.
    public init(logger: Logger, clock: any VeneerClock, metrics: any MetricsFactory, transports: any TransportProvider,
                stateDirectory: String, resources: [Resource] = [.posts], limits: BuildLimits = BuildLimits(),
                carried: CarriedState = CarriedState(), health: HealthBoard = HealthBoard(),
                stores: any StoreProvider = NoStores(), admin: AdminRoutes = AdminRoutes()) {
        self.logger = logger
        self.clock = clock
        self.metrics = metrics
        self.transports = transports
        self.stateDirectory = stateDirectory
        self.resources = resources
        self.limits = limits
        self.carried = carried
        self.health = health
        self.stores = stores
        self.admin = admin
    }
}

extension BuildContext {
    /// The key of the entry's own carried state (a cache's storage): a reload finds it again
    /// while an identical entry stands at the same rank among identical ones.
    /// `parts` are what else the state depends on (see ``CarriedKey/entry(_:_:)``).
    public func entryKey(_ parts: any Hashable & Sendable...) -> CarriedKey {
        CarriedKey(entry: entry, parts: parts)
    }
}

/// The limits that factories need to know.
public struct BuildLimits: Sendable, Hashable {
    /// The largest upstream response body buffered whole (a streamed one passes, whatever its size).
    public var responseBody: Int
    /// The longest pause of a streamed body (`limits.body_timeout`).
    public var bodyTimeout: Duration

    /// Creates limits.
    public init(responseBody: Int = 16 << 20, bodyTimeout: Duration = .seconds(30)) {
        self.responseBody = responseBody
        self.bodyTimeout = bodyTimeout
    }
}

/// A store provider with only `memory`, for code that builds chains without a configuration.
public struct NoStores: StoreProvider {
    /// Creates the provider.
    public init() {}
    /// Fails for every name: there are no named stores.
    public func store(named name: String) async throws -> any KeyValueStore {
        throw StoreError(store: name, reason: "no such store")
    }
}
