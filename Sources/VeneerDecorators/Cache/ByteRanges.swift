import VeneerCore

/// What a `Range` request asks for (RFC 9110 §14.1.2), in bytes.
enum RangeRequest: Equatable {
    /// `first-` or `first-last`.
    case from(Int, through: Int?)
    /// `-length`: the last `length` bytes.
    case suffix(Int)

    /// The ranges of a `Range` field value: nil when it is not a valid `bytes` range set
    /// (which a server ignores, RFC 9110 §14.2). The unit is compared without regard to case.
    static func parse(_ value: String) -> [RangeRequest]? {
        let text = value.trimmingSpaces
        guard text.utf8.count > 6, text.prefix(6).lowercased() == "bytes=" else { return nil }
        var ranges: [RangeRequest] = []
        for piece in text.dropFirst(6).split(separator: ",", omittingEmptySubsequences: false) {
            let spec = piece.trimmingSpaces
            if spec.isEmpty { continue }  // `1#` lists may hold empty elements
            guard let dash = spec.firstIndex(of: "-") else { return nil }
            let first = spec[..<dash], last = spec[spec.index(after: dash)...]
            if first.isEmpty {
                guard let length = number(last) else { return nil }
                ranges.append(.suffix(length))
            } else {
                guard let start = number(first) else { return nil }
                if last.isEmpty {
                    ranges.append(.from(start, through: nil))
                } else {
                    guard let end = number(last), end >= start else { return nil }
                    ranges.append(.from(start, through: end))
                }
            }
        }
        return ranges.isEmpty ? nil : ranges
    }

    /// The bytes it selects of a representation `length` bytes long; nil when it selects none.
    func resolve(length: Int) -> ClosedRange<Int>? {
        switch self {
        case .from(let first, let last):
            guard first < length else { return nil }
            return first...min(last ?? length - 1, length - 1)
        case .suffix(let count):
            guard count > 0, length > 0 else { return nil }
            return max(0, length - count)...(length - 1)
        }
    }

    private static func number(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.utf8.count <= 15, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        return Int(text)
    }
}

/// The `Content-Range` of a 206 that holds one range (RFC 9110 §14.4): `bytes 0-99/1234`.
struct ContentRange: Equatable {
    let first: Int
    let last: Int
    /// The complete length; nil when the sender did not know it (`/*`).
    let complete: Int?

    static func parse(_ value: String) -> ContentRange? {
        let text = value.trimmingSpaces
        guard text.utf8.count > 6, text.prefix(6).lowercased() == "bytes " else { return nil }
        let rest = text.dropFirst(6)
        guard let dash = rest.firstIndex(of: "-"), let slash = rest.firstIndex(of: "/"), dash < slash,
              let first = digits(rest[..<dash]), let last = digits(rest[rest.index(after: dash)..<slash]), last >= first else { return nil }
        let length = rest[rest.index(after: slash)...]
        if length == "*" { return ContentRange(first: first, last: last, complete: nil) }
        guard let complete = digits(length), last < complete else { return nil }
        return ContentRange(first: first, last: last, complete: complete)
    }

    var text: String { "bytes \(first)-\(last)/\(complete.map(String.init) ?? "*")" }

    private static func digits(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.utf8.count <= 15, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        return Int(text)
    }
}
