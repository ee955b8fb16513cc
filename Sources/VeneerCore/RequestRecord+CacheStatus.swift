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
        for member in status.split(separator: ";") {
            let item = member.trimmingSpaces
            switch item {
            case "hit": hit = true
            case "stored": stored = true
            case "collapsed": collapsed = true
            default:
                if item.hasPrefix("fwd=") {
                    forward = item.dropFirst(4)
                } else if item.hasPrefix("fwd-status=") {
                    forwardStatus = item.dropFirst(11)
                } else if item.hasPrefix("detail=") {
                    detail = item.dropFirst(7)
                }
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
