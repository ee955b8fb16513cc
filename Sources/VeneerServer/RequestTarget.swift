import VeneerCore

/// What a request target (`/posts/13?x=1`) means to Veneer, parsed strictly: only
/// `/{collection}` and `/{collection}/{id}` of an exposed collection are routes, ids are
/// checked as ids, and nothing else ever reaches the upstream.
enum RequestTarget: Equatable {
    /// A posts API route with the raw query (nil when there is none).
    case route(ResourceRoute, query: String?)
    /// An admin path below `/-/` (without the prefix), with its query.
    case admin(path: String, query: String?)
    /// An item path whose id is not a valid id of its collection (400).
    case badID(Resource, String)
    /// A query with characters that are not allowed (400).
    case badQuery
    /// Anything else (404).
    case notFound

    static func parse(_ target: String, resources: [Resource]) -> RequestTarget {
        var target = target
        // Over the bytes: this runs for every request.
        return target.withUTF8 { bytes in parse(bytes, resources: resources) }
    }

    static func parse(_ bytes: UnsafeBufferPointer<UInt8>, resources: [Resource]) -> RequestTarget {
        let slash = UInt8(ascii: "/")
        var pathEnd = 0
        while pathEnd < bytes.count, bytes[pathEnd] != UInt8(ascii: "?") { pathEnd += 1 }
        var query: String?
        if pathEnd < bytes.count {
            let rawQuery = UnsafeBufferPointer(rebasing: bytes[(pathEnd + 1)...])
            guard rawQuery.allSatisfy(isQueryByte) else { return .badQuery }
            if !rawQuery.isEmpty { query = String(decoding: rawQuery, as: UTF8.self) }
        }
        guard pathEnd > 0, bytes[0] == slash else { return .notFound }
        if pathEnd >= 3, bytes[1] == UInt8(ascii: "-"), bytes[2] == slash {
            return .admin(path: String(decoding: UnsafeBufferPointer(rebasing: bytes[3..<pathEnd]), as: UTF8.self), query: query)
        }
        // Split at '/', keeping empty segments: "//posts" or "/posts/" are not routes.
        var nameEnd = 1
        while nameEnd < pathEnd, bytes[nameEnd] != slash { nameEnd += 1 }
        let name = UnsafeBufferPointer(rebasing: bytes[1..<nameEnd])
        guard let resource = resources.first(where: { Self.isNamed($0.name, name) }) else { return .notFound }
        guard nameEnd < pathEnd else { return .route(.list(resource), query: query) }
        let idBytes = UnsafeBufferPointer(rebasing: bytes[(nameEnd + 1)..<pathEnd])
        guard !idBytes.isEmpty, !idBytes.contains(slash) else { return .notFound }
        guard let id = resource.canonicalID(bytes: idBytes) else { return .badID(resource, String(decoding: idBytes, as: UTF8.self)) }
        return .route(.item(resource, id), query: query)
    }

    /// Whether `bytes` are `name`'s: compared as bytes (the views' generic comparison cost
    /// each request some 700 instructions).
    @inline(__always)
    static func isNamed(_ name: String, _ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard name.utf8.count == bytes.count else { return false }
        let equal = name.utf8.withContiguousStorageIfAvailable { text in
            for index in 0..<text.count where text[index] != bytes[index] { return false }
            return true
        }
        return equal ?? name.utf8.elementsEqual(bytes)
    }

    /// RFC 3986 query characters: unreserved, sub-delims, ':', '@', '/', '?', and '%'
    /// (escapes are passed on as they are).
    static func isQueryByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "!"), UInt8(ascii: "$"),
             UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"),
             UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="), UInt8(ascii: ":"), UInt8(ascii: "@"), UInt8(ascii: "/"),
             UInt8(ascii: "?"), UInt8(ascii: "%"):
            return true
        default:
            return false
        }
    }
}
