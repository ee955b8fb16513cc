import Foundation
import VeneerCore

extension CacheDecorator: StatusReporting {
    /// Lookups by result since the storage was made (a reload that carries the storage over
    /// keeps them), the memory tier's size, and the hit ratio: answers from the cache (fresh,
    /// joined to a request under way, stale, revalidated) over every lookup that was not a bypass.
    public func statusFigures() async -> [StatusFigure] {
        let tally = storage.metrics.tally
        let hits = tally["hit"] + tally["collapsed"]
        let fromCache = hits + tally["stale"] + tally["revalidated"]
        let lookups = fromCache + tally["miss"]
        return [
            StatusFigure("hits", hits), StatusFigure("misses", tally["miss"]), StatusFigure("stale", tally["stale"]),
            StatusFigure("revalidated", tally["revalidated"]), StatusFigure("bypass", tally["bypass"]),
            StatusFigure("entries", storage.entryCount), StatusFigure("bytes", storage.byteCount),
            StatusFigure("hit_ratio", lookups == 0 ? .null : .number(String(format: "%.3f", Double(fromCache) / Double(lookups)))),
        ]
    }
}
