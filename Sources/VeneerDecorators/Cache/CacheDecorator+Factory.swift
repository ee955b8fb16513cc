import CoreMetrics
import HTTPTypes
import Logging
import VeneerConfig
import VeneerCore

extension CacheDecorator {
    /// The `cache` entry of the registry.
    public static let factory = DecoratorFactory(
        name: "cache",
        summary: "shared HTTP cache: read-through GETs, write-through creates and updates, coalesced misses, stale-if-error",
        options: CacheOptions.docs,
        answersWithoutInner: true,
        metrics: CacheMetrics.descriptions,
        commands: [purgeCommand],
        decode: CacheOptions.decode,
        make: { options, inner, context in
            var persistent: (any KeyValueStore)?
            if let name = options.store { persistent = try await context.stores.store(named: name) }
            // The same entry (name, options, rank among identical entries) finds the same
            // storage after a reload: the cache stays warm wherever other decorators come and
            // go, as long as what fills it is the same: the origin, and the credentials an
            // auth_refresh inside sends (another upstream or another account, after a reload
            // or a switch, must not be answered from this one's entries). A store that was
            // redefined is a new object: then the storage starts afresh.
            let fills = context.inside.filter { $0.name == "auth_refresh" } + context.inside.suffix(1)
            let storage = context.carried.value(for: context.entryKey(fills, persistent.map { ObjectIdentifier($0 as AnyObject) })) {
                CacheStorage(maxEntries: options.maxEntries, maxBytes: options.maxBytes, minFree: options.minFree, persistent: persistent,
                             clock: context.clock, metrics: CacheMetrics(label: options.store ?? "memory", factory: context.metrics),
                             logger: context.logger)
            }
            let resources = context.resources, clock = context.clock
            context.admin.register("cache", endpoints: adminEndpoints) { request in
                await admin(request, storage: storage, resources: resources, clock: clock)
            }
            var decorator = CacheDecorator(inner: inner, options: options, storage: storage, keyedHeaders: context.passedForwardingHeaders,
                                           directives: context.requestDirectives, backgroundWork: context.backgroundWork)
            decorator.buffers = context.buffers
            decorator.spans = context.spans
            return decorator
        }
    )

    /// What `/-/cache` answers, as `GET /-/` lists it.
    static let adminEndpoints = [
        AdminRoutes.Endpoint(
            path: "/-/cache", methods: [.get, .delete],
            summary: "GET ?path=/posts/1: what the chain's caches store for a path (every query and every caller's copy; "
                + "a percent-encoded query names that query alone), 404 when nothing; DELETE ?path=/posts/1: remove that, "
                + "DELETE without a path: remove everything, in memory and in the cache's store (what veneer purge sends)"),
    ]

    /// A cache in front of `inner` with its own storage, for code that builds chains by hand.
    public static func make(inner: any Handler, options: CacheOptions, clock: any VeneerClock = SystemClock(),
                            store: (any KeyValueStore)? = nil, metrics: any CoreMetrics.MetricsFactory) -> CacheDecorator {
        CacheDecorator(inner: inner, options: options,
                       storage: CacheStorage(maxEntries: options.maxEntries, maxBytes: options.maxBytes, minFree: options.minFree, persistent: store, clock: clock,
                                             metrics: CacheMetrics(label: "memory", factory: metrics), logger: .init(label: "veneer.cache")))
    }

    /// Drops expired entries now (the background loop does this every 30 seconds).
    public func purge() async { await storage.purge() }

    /// Waits until the persistent tier has every write.
    public func flush() async { await storage.flush() }
}
