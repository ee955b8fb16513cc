/// The responses stored under one key, one per set of `Vary` values: almost always one,
/// held directly, so that a key costs no array of its own.
enum StoredVariants: Sequence, Sendable, LRUSized {
    case one(CacheEntry)
    case many([CacheEntry])

    /// `entries` as stored; nil for none.
    init?(_ entries: [CacheEntry]) {
        switch entries.count {
        case 0: return nil
        case 1: self = .one(entries[0])
        default: self = .many(entries)
        }
    }

    /// The entries, newest first.
    var entries: [CacheEntry] {
        switch self {
        case .one(let entry): return [entry]
        case .many(let entries): return entries
        }
    }

    /// What they occupy together (the entries are immutable: it never changes).
    var size: Int {
        switch self {
        case .one(let entry): return entry.size
        case .many(let entries): return entries.reduce(0) { $0 + $1.size }
        }
    }

    func makeIterator() -> Iterator {
        switch self {
        case .one(let entry): return Iterator(single: entry, rest: [].makeIterator())
        case .many(let entries): return Iterator(single: nil, rest: entries.makeIterator())
        }
    }

    /// Goes through the entries without making an array of one.
    struct Iterator: IteratorProtocol {
        var single: CacheEntry?
        var rest: IndexingIterator<[CacheEntry]>

        mutating func next() -> CacheEntry? {
            if let entry = single {
                single = nil
                return entry
            }
            return rest.next()
        }
    }
}
