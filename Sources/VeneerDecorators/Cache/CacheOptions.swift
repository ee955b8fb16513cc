import HTTPTypes
import VeneerConfig
import VeneerCore

/// Options of `cache`, decoded once.
public struct CacheOptions: Sendable, Hashable {
    /// Freshness for a response that gives none of its own.
    public enum DefaultFreshness: Sendable, Hashable {
        /// This long: the operator's word beats any heuristic.
        case duration(Duration)
        /// RFC 9111 §4.2.2: a tenth of the time since `Last-Modified`, at most ``CacheOptions/heuristicMax``;
        /// without `Last-Modified`, none (stored, but revalidated or fetched again before use).
        case heuristic
    }

    /// A named store for the persistent tier; nil or `memory`: memory only.
    public var store: String?
    /// Freshness when the upstream gives none (heuristically cacheable statuses, or `public`).
    public var ttl: DefaultFreshness = .duration(.seconds(60))
    /// The most that ``DefaultFreshness/heuristic`` gives.
    public var heuristicMax: Duration = .seconds(86_400)
    /// Freshness that replaces whatever the upstream says (no-store and private still hold).
    public var ttlOverride: Duration?
    /// The targeted cache-control fields obeyed (RFC 9213), in order of precedence: the first
    /// one a response carries validly replaces its `Cache-Control` and `Expires`.
    public var targetedFields: [HTTPField.Name] = [.veneerCacheControl]
    /// Keys kept in memory (and in the persistent tier).
    public var maxEntries: Int = 10_000
    /// Bytes kept in memory (and in the persistent tier).
    public var maxBytes: Int = 64 << 20
    /// Larger responses are passed through but not stored.
    public var maxEntrySize: Int = 1 << 20
    /// The free space a persistent tier on a local disk leaves on its file system (nginx's
    /// `min_free`): `max_bytes` bounds the entries, not the disk, and what shares the disk
    /// (the token store first) must still be able to write. 0: no floor.
    public var minFree: Int = 16 << 20
    /// How long past its freshness a response may stand in for a failing upstream.
    public var staleIfError: Duration = .zero
    /// How long past its freshness a response may be served while it is refreshed.
    public var staleWhileRevalidate: Duration = .zero

    /// The defaults of DESIGN.md.
    public init() {}

    static let docs: [OptionDoc] = [
        OptionDoc("store", "store name", default: "memory", "a sqlite or postgres store for a cache that survives restarts (memory stays in front)"),
        OptionDoc("ttl", "duration or heuristic", default: "60s",
                  "freshness when the upstream gives none (targeted field, Cache-Control, Expires win); heuristic: 10% of the age of Last-Modified"),
        OptionDoc("heuristic_max", "duration", default: "1d", "the most freshness ttl: heuristic gives"),
        OptionDoc("ttl_override", "duration", "freshness that replaces the upstream's (no-store and private are still obeyed)"),
        OptionDoc("targeted_fields", "list of field names", default: "[Veneer-Cache-Control]",
                  "targeted cache-control fields obeyed before Cache-Control, first first (RFC 9213); e.g. add CDN-Cache-Control"),
        OptionDoc("max_entries", "integer", default: "10000", "keys kept, least recently used dropped first"),
        OptionDoc("max_bytes", "size", default: "64MB", "bytes kept, least recently used dropped first"),
        OptionDoc("max_entry_size", "size", default: "1MB", "larger responses pass through without being stored"),
        OptionDoc("min_free", "size", default: "16MB",
                  "free space a sqlite store's cache leaves on its disk: below it the oldest entries leave the store (0: no floor)"),
        OptionDoc("stale_if_error", "duration", default: "0s", "serve a stale copy this long when the upstream fails"),
        OptionDoc("stale_while_revalidate", "duration", default: "0s", "serve a stale copy this long while refreshing it in the background"),
    ]

    /// The longest freshness or staleness an option gives: a year, the `max-age` of
    /// "immutable" answers on the web (31536000).
    static let longest = Duration.days(365)
    static let freshness = Bounded<Durations>(.zero ... longest)

    static func decode(_ mapping: ConfigMapping, site: ChainSite) -> CacheOptions? {
        var options = CacheOptions()
        let store = mapping.storeReference()
        if store == nil && !mapping.contains("store") { mapping.note("store", .string("memory")) }
        options.store = store == "memory" ? nil : store
        if let ttl = mapping["ttl"], case .scalar = ttl.node, ttl.scalarText() == "heuristic" {
            options.ttl = .heuristic
            mapping.note("ttl", .string("heuristic"))
            options.heuristicMax = mapping.duration("heuristic_max", default: options.heuristicMax, in: .init(.seconds(1) ... Self.longest))
                ?? options.heuristicMax
        } else {
            let seconds = mapping.duration("ttl", default: .seconds(60), in: Self.freshness) ?? .seconds(60)
            options.ttl = .duration(seconds)
            if mapping.contains("heuristic_max") { mapping.error("heuristic_max", "applies only with ttl: heuristic") }
        }
        options.ttlOverride = mapping.duration("ttl_override", in: Self.freshness)
        if mapping.contains("targeted_fields") {
            options.targetedFields = []
            for (index, value) in (mapping["targeted_fields"]?.list() ?? []).enumerated() {
                guard let text = value.string() else { continue }
                guard let name = HTTPField.Name(text) else {
                    value.error("\"\(text)\" is not a field name")
                    continue
                }
                if name == .cacheControl {
                    value.error("Cache-Control is always obeyed after the targeted fields; list only targeted ones (such as CDN-Cache-Control)")
                } else if options.targetedFields.contains(name) {
                    value.error("\(text) is listed twice (entry \(index))")
                } else {
                    options.targetedFields.append(name)
                }
            }
        }
        mapping.note("targeted_fields", .array(options.targetedFields.map { .string($0.rawName) }))
        options.maxEntries = mapping.int("max_entries", default: options.maxEntries, in: 1...100_000_000) ?? options.maxEntries
        // A sqlite or postgres store holds more than memory could; an entry is held whole in
        // memory as it is stored, and its length is kept in 32 bits.
        options.maxBytes = mapping.size("max_bytes", default: options.maxBytes, in: .init(0...(1 << 40))) ?? options.maxBytes
        options.maxEntrySize = mapping.size("max_entry_size", default: options.maxEntrySize, in: .init(0...(1 << 30))) ?? options.maxEntrySize
        // A floor of free space on a disk: as large as a disk.
        options.minFree = mapping.size("min_free", default: options.minFree, in: .init(0...(1 << 40))) ?? options.minFree
        options.staleIfError = mapping.duration("stale_if_error", default: .zero, in: Self.freshness) ?? .zero
        options.staleWhileRevalidate = mapping.duration("stale_while_revalidate", default: .zero, in: Self.freshness) ?? .zero
        if options.maxEntrySize > options.maxBytes {
            mapping.error("max_entry_size", "is larger than max_bytes (\(Units.format(bytes: options.maxBytes)))")
        }
        return options
    }
}

extension HTTPField.Name {
    /// `Veneer-Cache-Control`: cache directives for Veneer alone (RFC 9213), never passed on.
    static let veneerCacheControl = HTTPField.Name("Veneer-Cache-Control")!
    /// `CDN-Cache-Control` (RFC 9213 §3).
    static let cdnCacheControl = HTTPField.Name("CDN-Cache-Control")!
}
