import HTTPTypes

/// Headers that copies made by ``ProxyHeaders/sharedCopy(removing:)`` keep for many answers
/// (cached entries), so that later copies of the same fields share one storage instead of
/// each keeping its own.
///
/// An origin without validators answers every resource with the same header fields but for
/// `Date`, which changes once a second (nginx: `Server`, `Date`, `Content-Type`,
/// `Cache-Control`): the entries stored within one second can then share one storage, where each
/// held its own (about 270 bytes of the 700 a cached entry of nginx's answers takes). Fields
/// with an `ETag` or `Last-Modified` of their own share nothing, and cost a hash and a look at
/// one slot each. Only fields held as they came off a connection are shared, and only with
/// fields held the same way and equal byte for byte, so that sharing changes no byte of any
/// answer: the server writes the same from either.
///
/// A few slots, each replaced by the latest fields that hash to it: it keeps at most
/// ``slots`` storages alive beyond the copies that hold them. Not thread-safe: its owner locks it.
package struct SharedHeadersPool: Sendable {
    /// How many storages it keeps at most.
    package static let slots = 16

    private var kept: [HeaderStorage?] = Array(repeating: nil, count: SharedHeadersPool.slots)

    /// An empty pool.
    package init() {}

    /// Headers equal to `headers` kept earlier, whose storage `headers` can be replaced with;
    /// nil when there are none (`headers` is then kept for later copies, when it can be shared).
    package mutating func sharing(_ headers: ProxyHeaders) -> ProxyHeaders? {
        guard headers.appended.isEmpty, case .shared(let storage) = headers.base, case .lines(let lines) = storage.source else { return nil }
        var hasher = Hasher()
        lines.bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
        let slot = Int(UInt(bitPattern: hasher.finalize()) % UInt(Self.slots))
        if let earlier = kept[slot], earlier !== storage, case .lines(let earlierLines) = earlier.source, Self.same(earlierLines, lines) {
            return ProxyHeaders(base: .shared(earlier))
        }
        kept[slot] = storage
        return nil
    }

    /// Whether the server writes the same from both, and reading them gives the same fields.
    private static func same(_ one: FieldLines, _ other: FieldLines) -> Bool {
        one.count == other.count && one.hasDate == other.hasDate && one.sawConnection == other.sawConnection
            && one.declaredLength == other.declaredLength && one.nameBits == other.nameBits
            && ObjectIdentifier(one.reader) == ObjectIdentifier(other.reader) && one.bytes == other.bytes
    }
}
