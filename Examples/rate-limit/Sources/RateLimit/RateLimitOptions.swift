import VeneerConfig
import VeneerCore

/// Options of `rate_limit`, decoded once when the chain is checked (never on a request).
public struct RateLimitOptions: Sendable, Hashable {
    /// What one budget is kept for.
    public enum Key: Sendable, Hashable {
        /// Each client address.
        case client
        /// The value of a request header (an API key); requests without it share one budget.
        case header(String)
        /// Every request together.
        case global
    }

    /// Requests allowed per ``period``, on average.
    public var requests: Int
    /// The period ``requests`` are counted over.
    public var period: Duration
    /// How many requests may come at once after a quiet spell (the bucket's size).
    public var burst: Int
    /// Who gets a budget of their own.
    public var key: Key
    /// The most budgets kept at once: memory is bounded by this, never by how many callers come.
    public var maxKeys: Int

    /// Options allowing `requests` per `period`.
    public init(requests: Int, period: Duration = .seconds(1), burst: Int? = nil, key: Key = .client, maxKeys: Int = 10_000) {
        self.requests = requests
        self.period = period
        self.burst = burst ?? requests
        self.key = key
        self.maxKeys = maxKeys
    }

    /// What `veneer decorators` lists, and the keys the options mapping accepts.
    static let docs: [OptionDoc] = [
        OptionDoc("requests", "integer", "requests allowed per period (required)"),
        OptionDoc("per", "duration", default: "1s", "the period"),
        OptionDoc("burst", "integer", default: "requests", "requests allowed at once after a quiet spell"),
        OptionDoc("key", "client, global or header:NAME", default: "client", "who gets a budget of their own"),
        OptionDoc("max_keys", "integer", default: "10000", "the most budgets kept at once (the quietest goes first)"),
    ]

    /// Every problem is reported with its line and column; nothing is built from bad options.
    static func decode(_ mapping: ConfigMapping, site: ChainSite) -> RateLimitOptions? {
        guard let requests = mapping.required("requests")?.int(in: 1...1_000_000) else { return nil }
        mapping.note("requests", .int(requests))
        // Every number is read within bounds: out of them is an error at the value, never a trap.
        let period = mapping.duration("per", default: .seconds(1), in: .init(.milliseconds(1) ... .seconds(86_400))) ?? .seconds(1)
        let burst = mapping.int("burst", default: requests, in: 1...1_000_000) ?? requests
        let maxKeys = mapping.int("max_keys", default: 10_000, in: 1...1_000_000) ?? 10_000
        var key = Key.client
        switch mapping.string("key", default: "client") ?? "client" {
        case "client": key = .client
        case "global": key = .global
        case let text where text.hasPrefix("header:") && text.count > "header:".count:
            key = .header(String(text.dropFirst("header:".count)))
        case let text:
            mapping.error("key", "\"\(text)\" is not client, global or header:NAME")
        }
        return RateLimitOptions(requests: requests, period: period, burst: burst, key: key, maxKeys: maxKeys)
    }
}
