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
        let pathPart: Substring
        var query: String?
        if let mark = target.utf8.firstIndex(of: UInt8(ascii: "?")) {
            pathPart = target[..<mark]
            let rawQuery = target[target.index(after: mark)...]
            guard rawQuery.utf8.allSatisfy(isQueryByte) else { return .badQuery }
            query = rawQuery.isEmpty ? nil : String(rawQuery)
        } else {
            pathPart = Substring(target)
        }
        let utf8 = pathPart.utf8
        guard utf8.first == UInt8(ascii: "/") else { return .notFound }
        let rest = pathPart.dropFirst()
        if rest.hasPrefix("-/") { return .admin(path: String(rest.dropFirst(2)), query: query) }
        // Split at '/', keeping empty segments: "//posts" or "/posts/" are not routes.
        guard let slash = rest.utf8.firstIndex(of: UInt8(ascii: "/")) else {
            guard let resource = resources.first(where: { $0.name == rest }) else { return .notFound }
            return .route(.list(resource), query: query)
        }
        let name = rest[..<slash]
        let idText = rest[rest.index(after: slash)...]
        guard let resource = resources.first(where: { $0.name == name }), !idText.isEmpty else { return .notFound }
        if idText.utf8.contains(UInt8(ascii: "/")) { return .notFound }
        guard let id = resource.canonicalID(idText) else { return .badID(resource, String(idText)) }
        return .route(.item(resource, id), query: query)
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
