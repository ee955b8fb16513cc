extension RequestRecord {
    /// A cache's `Cache-Status` (RFC 9211) in a few words, for the cache's entry: `hit`;
    /// `stale, revalidating` (served stale while it is refreshed); `stale if error 503`;
    /// `collapsed` (answered by another request's fetch); `revalidated` (a 304 freshened the
    /// stored copy); else why it went to the origin (`miss`, `expired`, `partial`, `passed`
    /// for a write or a conditional read, `bypass` for a read with a body), and ` stored`
    /// when it stored the answer. Anything else is left as it is.
    public static func cacheSummary(_ status: String) -> String {
        var hit = false, stored = false, collapsed = false
        var forward: Substring?, forwardStatus: Substring?, detail: Substring?
        // Byte by byte (a `Cache-Status` is ASCII): splitting and trimming by Character cost
        // more than the rest of a sampled request's spans (perf).
        var rest = status.utf8[...]
        while !rest.isEmpty {
            let end = rest.firstIndex(of: UInt8(ascii: ";")) ?? rest.endIndex
            var item = rest[..<end]
            rest = end == rest.endIndex ? rest[end...] : rest[rest.index(after: end)...]
            while let first = item.first, first == UInt8(ascii: " ") || first == UInt8(ascii: "\t") { item = item.dropFirst() }
            while let last = item.last, last == UInt8(ascii: " ") || last == UInt8(ascii: "\t") { item = item.dropLast() }
            if item.elementsEqual("hit".utf8) {
                hit = true
            } else if item.elementsEqual("stored".utf8) {
                stored = true
            } else if item.elementsEqual("collapsed".utf8) {
                collapsed = true
            } else if item.starts(with: "fwd=".utf8) {
                forward = Substring(item.dropFirst(4))
            } else if item.starts(with: "fwd-status=".utf8) {
                forwardStatus = Substring(item.dropFirst(11))
            } else if item.starts(with: "detail=".utf8) {
                detail = Substring(item.dropFirst(7))
            }
        }
        switch detail {
        case "stale-while-revalidate": return "stale, revalidating"
        case "stale-if-error": return "stale if error" + (forwardStatus.map { " " + $0 } ?? "")
        default: break
        }
        if hit { return "hit" }
        if collapsed { return "collapsed" }
        guard let forward else { return status }
        if forward == "stale", forwardStatus == "304" { return "revalidated" }
        let word: String = switch forward {
        case "uri-miss", "vary-miss", "miss": "miss"
        case "stale": "expired"
        case "request": "passed"
        default: String(forward)
        }
        return stored ? word + " stored" : word
    }
}
