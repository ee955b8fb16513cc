import VeneerConfig
import VeneerCore

/// Options of `cache`, decoded once.
public struct CacheOptions: Sendable, Hashable {
    /// A named store for the persistent tier; nil or `memory`: memory only.
    public var store: String?
    /// Freshness when the upstream gives none (heuristically cacheable statuses only).
    public var ttl: Duration = .seconds(60)
    /// Freshness that replaces whatever the upstream says (no-store and private still hold).
    public var ttlOverride: Duration?
    /// Keys kept in memory (and in the persistent tier).
    public var maxEntries: Int = 10_000
    /// Bytes kept in memory (and in the persistent tier).
    public var maxBytes: Int = 64 << 20
    /// Larger responses are passed through but not stored.
    public var maxEntrySize: Int = 1 << 20
    /// How long past its freshness a response may stand in for a failing upstream.
    public var staleIfError: Duration = .zero
    /// How long past its freshness a response may be served while it is refreshed.
    public var staleWhileRevalidate: Duration = .zero

    /// The defaults of DESIGN.md.
    public init() {}

    static let docs: [OptionDoc] = [
        OptionDoc("store", "store name", default: "memory", "a sqlite or postgres store for a cache that survives restarts (memory stays in front)"),
        OptionDoc("ttl", "duration", default: "60s", "freshness when the upstream gives none (Cache-Control/Expires win)"),
        OptionDoc("ttl_override", "duration", "freshness that replaces the upstream's (no-store and private are still obeyed)"),
        OptionDoc("max_entries", "integer", default: "10000", "keys kept, least recently used dropped first"),
        OptionDoc("max_bytes", "size", default: "64MB", "bytes kept, least recently used dropped first"),
        OptionDoc("max_entry_size", "size", default: "1MB", "larger responses pass through without being stored"),
        OptionDoc("stale_if_error", "duration", default: "0s", "serve a stale copy this long when the upstream fails"),
        OptionDoc("stale_while_revalidate", "duration", default: "0s", "serve a stale copy this long while refreshing it in the background"),
    ]

    static func decode(_ mapping: ConfigMapping, site: ChainSite) -> CacheOptions? {
        var options = CacheOptions()
        let store = mapping.storeReference()
        if store == nil && !mapping.contains("store") { mapping.note("store", .string("memory")) }
        options.store = store == "memory" ? nil : store
        options.ttl = mapping.duration("ttl", default: options.ttl) ?? options.ttl
        options.ttlOverride = mapping.duration("ttl_override")
        options.maxEntries = mapping.int("max_entries", default: options.maxEntries, in: 1...100_000_000) ?? options.maxEntries
        options.maxBytes = mapping.size("max_bytes", default: options.maxBytes) ?? options.maxBytes
        options.maxEntrySize = mapping.size("max_entry_size", default: options.maxEntrySize) ?? options.maxEntrySize
        options.staleIfError = mapping.duration("stale_if_error", default: .zero) ?? .zero
        options.staleWhileRevalidate = mapping.duration("stale_while_revalidate", default: .zero) ?? .zero
        if options.maxEntrySize > options.maxBytes {
            mapping.error("max_entry_size", "is larger than max_bytes (\(Units.format(bytes: options.maxBytes)))")
        }
        if options.ttl < .zero || (options.ttlOverride ?? .zero) < .zero { mapping.error("ttl", "must not be negative") }
        return options
    }
}
