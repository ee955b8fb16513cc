import Crypto
import HTTPTypes
import VeneerCore

/// The keys of cached reads: `I/posts/13 q=1 ` or `L/posts a=1&b=2 ` (kind, path, the query
/// sorted by parameter name, then the credentials partition when there is one).
///
/// Lists and items are told apart, and the path ends with a space, so that a write drops an
/// item (with any query) and every list by prefix. Keys of small items fit in a `String`
/// without an allocation of their own (15 bytes): the hit path builds one per request, and
/// each cached entry keeps its key.
enum CacheKey {
    /// The key of a read. `keyedHeaders` names request fields whose values also select the
    /// entry (their values follow the query, in the order given): a request field that the
    /// upstream may reflect in its answer must key the cache, or one caller's answer is
    /// served to another. `plain`: the request is known to have no field but its id
    /// (``CacheDecorator/asksNothing(_:)``), so no credentials to look for.
    static func make(_ request: ProxyRequest, keyedHeaders: [HTTPField.Name] = [], plain: Bool = false) -> String {
        let resource = request.route.resource
        let id = request.route.id
        let query = sortedQuery(request.query)
        // A request with no field but its id has no credentials (CacheDecorator.asksNothing).
        let partition = plain ? "" : Self.partition(request.headers)
        var extra = ""
        for name in keyedHeaders {
            // Length-prefixed, so that no value can pose as another field's.
            let value = request.headers[name] ?? ""
            extra += " \(name.canonicalName)=\(value.utf8.count):\(value)"
        }
        let length = 4 + resource.name.utf8.count + (id.map { $0.utf8.count + 1 } ?? 0) + query.utf8.count + extra.utf8.count
            + partition.utf8.count
        // Its bytes copied in one pass (appending piece by piece cost a hit 1,300 instructions);
        // a key of at most 15 bytes is held inline, without an allocation of its own. Each
        // piece is copied whole where its bytes are contiguous (a byte loop over a `UTF8View`
        // cost some 30 instructions a byte), as ResourceRoute's paths are.
        return String(unsafeUninitializedCapacity: length) { bytes in
            var cursor = ByteCursor(UnsafeMutableRawBufferPointer(bytes), reserved: length)
            cursor.append(byte: id == nil ? UInt8(ascii: "L") : UInt8(ascii: "I"))
            cursor.append(byte: UInt8(ascii: "/"))
            cursor.append(resource.name)
            if let id {
                cursor.append(byte: UInt8(ascii: "/"))
                cursor.append(id)
            }
            cursor.append(byte: UInt8(ascii: " "))
            cursor.append(query)
            cursor.append(extra)
            cursor.append(byte: UInt8(ascii: " "))
            cursor.append(partition)
            return cursor.offset
        }
    }

    /// `I/posts/7 `: the start of every key of the item.
    static func itemPrefix(_ resource: Resource, _ id: String) -> String {
        var prefix = ""
        appendPrefix(resource, id: id, to: &prefix)
        return prefix
    }

    /// `L/posts `: the start of every key of a list of the resource.
    static func listPrefix(_ resource: Resource) -> String {
        var prefix = ""
        appendPrefix(resource, id: nil, to: &prefix)
        return prefix
    }

    private static func appendPrefix(_ resource: Resource, id: String?, to key: inout String) {
        if let id {
            key += "I/"
            key += resource.name
            key += "/"
            key += id
        } else {
            key += "L/"
            key += resource.name
        }
        key += " "
    }

    /// The query with its parameters sorted by name, parameters of the same name keeping
    /// their order (`b=2&a=1` and `a=1&b=2` are one key; `id=2&id=1` and `id=1&id=2` are
    /// not: an API may read repeated parameters in order).
    static func sortedQuery(_ query: String?) -> String {
        guard let query, !query.isEmpty else { return "" }
        let pairs = query.split(separator: "&", omittingEmptySubsequences: true)
        if pairs.count < 2 { return query }
        let names = pairs.map { $0.prefix { $0 != "=" } }
        if zip(names, names.dropFirst()).allSatisfy({ $0 <= $1 }) {
            // The usual case, already in order: nothing to build unless empty pieces (`a=1&&b=2`) go.
            let length = pairs.reduce(pairs.count - 1) { $0 + $1.utf8.count }
            return length == query.utf8.count ? query : pairs.joined(separator: "&")
        }
        let order = names.indices.sorted { names[$0] != names[$1] ? names[$0] < names[$1] : $0 < $1 }
        return order.map { pairs[$0] }.joined(separator: "&")
    }

    /// "" without credentials, else `#` and a SHA-256 of `Authorization` and `Cookie`: a
    /// caller only ever gets responses stored for its own credentials (which are never stored).
    static func partition(_ headers: HTTPFields) -> String {
        // The usual request has neither: two looks, no lists made.
        guard headers.contains(.authorization) || headers.contains(.cookie) else { return "" }
        let authorization = headers[values: .authorization]
        let cookies = headers[values: .cookie]
        guard !authorization.isEmpty || !cookies.isEmpty else { return "" }
        var hasher = SHA256()
        hasher.update(data: Array(("authorization:" + authorization.joined(separator: "\n") + "\ncookie:" + cookies.joined(separator: "; ")).utf8))
        let digits: [UInt8] = Array("0123456789abcdef".utf8)
        var text = "#"
        text.reserveCapacity(65)
        for byte in hasher.finalize() {
            text.unicodeScalars.append(UnicodeScalar(digits[Int(byte >> 4)]))
            text.unicodeScalars.append(UnicodeScalar(digits[Int(byte & 0xF)]))
        }
        return text
    }
}
