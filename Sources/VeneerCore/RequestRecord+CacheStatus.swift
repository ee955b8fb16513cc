extension RequestRecord {
    /// A cache's `Cache-Status` (RFC 9211) in a few words, for the cache's entry: `hit`;
    /// `stale, revalidating` (served stale while it is refreshed); `stale if error 503`;
    /// `collapsed` (answered by another request's fetch); `revalidated` (a 304 freshened the
    /// stored copy); else why it went to the origin (`miss`, `expired`, `partial`, `passed`
    /// for a write or a conditional read, `bypass` for a read with a body), and ` stored`
    /// when it stored the answer. Anything else is left as it is.
    public static func cacheSummary(_ status: String) -> String {
        var status = status
        return status.withUTF8 { summary($0) } ?? status
    }

    /// ``cacheSummary(_:)`` of a status's bytes (a `Cache-Status` is ASCII), nil for "as it is".
    /// On the bytes by integer offsets: slicing the `String` (its views round indices to
    /// characters) cost more than the rest of a sampled hit's spans (perf).
    private static func summary(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        var hit = false, stored = false, collapsed = false
        var forward: Range<Int>?, forwardStatus: Range<Int>?, detail: Range<Int>?
        func isBlank(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        func equals(_ range: Range<Int>, _ word: StaticString) -> Bool {
            range.count == word.utf8CodeUnitCount && (0..<range.count).allSatisfy { bytes[range.lowerBound + $0] == word.utf8Start[$0] }
        }
        /// What follows `prefix` in `range`, if it starts with it.
        func after(_ prefix: StaticString, in range: Range<Int>) -> Range<Int>? {
            let count = prefix.utf8CodeUnitCount
            guard range.count >= count, (0..<count).allSatisfy({ bytes[range.lowerBound + $0] == prefix.utf8Start[$0] }) else { return nil }
            return (range.lowerBound + count)..<range.upperBound
        }
        var start = 0
        while start < bytes.count {
            var end = start
            while end < bytes.count, bytes[end] != UInt8(ascii: ";") { end += 1 }
            var low = start, high = end
            while low < high, isBlank(bytes[low]) { low += 1 }
            while high > low, isBlank(bytes[high - 1]) { high -= 1 }
            let item = low..<high
            if equals(item, "hit") {
                hit = true
            } else if equals(item, "stored") {
                stored = true
            } else if equals(item, "collapsed") {
                collapsed = true
            } else if let value = after("fwd=", in: item) {
                forward = value
            } else if let value = after("fwd-status=", in: item) {
                forwardStatus = value
            } else if let value = after("detail=", in: item) {
                detail = value
            }
            start = end + 1
        }
        func text(_ range: Range<Int>) -> String { String(decoding: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self) }
        if let detail {
            if equals(detail, "stale-while-revalidate") { return "stale, revalidating" }
            if equals(detail, "stale-if-error") { return "stale if error" + (forwardStatus.map { " " + text($0) } ?? "") }
        }
        if hit { return "hit" }
        if collapsed { return "collapsed" }
        guard let forward else { return nil }
        if equals(forward, "stale"), let forwardStatus, equals(forwardStatus, "304") { return "revalidated" }
        let word: String
        if equals(forward, "uri-miss") || equals(forward, "vary-miss") || equals(forward, "miss") {
            word = "miss"
        } else if equals(forward, "stale") {
            word = "expired"
        } else if equals(forward, "request") {
            word = "passed"
        } else {
            word = text(forward)
        }
        return stored ? word + " stored" : word
    }
}
