import Foundation

/// The network address of the client that sent a request.
public struct ClientAddress: Hashable, Sendable, CustomStringConvertible {
    /// The address in network byte order: 4 bytes for IPv4, 16 for IPv6.
    public let bytes: [UInt8]
    /// Dotted quad or RFC 5952 text, formatted once (it goes into `X-Forwarded-For` and
    /// the logs of every request of a connection).
    public let description: String

    /// Creates an address from 4 or 16 bytes.
    public init?(bytes: [UInt8]) {
        guard bytes.count == 4 || bytes.count == 16 else { return nil }
        self.bytes = bytes
        description = Self.format(bytes)
    }

    /// Parses `127.0.0.1` or `::1` (no zone, no port).
    public init?(_ text: some StringProtocol) {
        guard let bytes = IPAddressParser.parse(text) else { return nil }
        self.bytes = bytes
        description = Self.format(bytes)
    }

    public static func == (lhs: ClientAddress, rhs: ClientAddress) -> Bool { lhs.bytes == rhs.bytes }

    public func hash(into hasher: inout Hasher) { hasher.combine(bytes) }

    /// Whether this is IPv4 (or an IPv4-mapped IPv6 address).
    public var isIPv4: Bool { bytes.count == 4 }

    /// The address with IPv4-mapped IPv6 (`::ffff:a.b.c.d`) turned into plain IPv4.
    public var unmapped: ClientAddress {
        if bytes.count == 16, bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF {
            return ClientAddress(bytes: Array(bytes[12..<16]))!
        }
        return self
    }

    /// Whether the address is on the loopback network (127.0.0.0/8 or ::1).
    public var isLoopback: Bool {
        let plain = unmapped
        if plain.bytes.count == 4 { return plain.bytes[0] == 127 }
        return plain.bytes == [UInt8](repeating: 0, count: 15) + [1]
    }

    static func format(_ bytes: [UInt8]) -> String {
        if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") }
        var groups: [UInt16] = []
        for index in stride(from: 0, to: 16, by: 2) {
            groups.append(UInt16(bytes[index]) << 8 | UInt16(bytes[index + 1]))
        }
        // Longest run of zero groups (length >= 2) becomes "::".
        var bestStart = -1, bestLength = 0, runStart = -1
        for index in 0...8 {
            if index < 8 && groups[index] == 0 {
                if runStart < 0 { runStart = index }
            } else if runStart >= 0 {
                if index - runStart > bestLength { bestStart = runStart; bestLength = index - runStart }
                runStart = -1
            }
        }
        let hex = groups.map { String($0, radix: 16) }
        if bestLength < 2 { return hex.joined(separator: ":") }
        let head = hex[0..<bestStart].joined(separator: ":")
        let tail = hex[(bestStart + bestLength)...].joined(separator: ":")
        return head + "::" + tail
    }
}

/// Text to bytes for IPv4 and IPv6 addresses, without the C library.
enum IPAddressParser {
    static func parse(_ text: some StringProtocol) -> [UInt8]? {
        if text.contains(":") { return parseIPv6(Substring(text)) }
        return parseIPv4(Substring(text))
    }

    static func parseIPv4(_ text: Substring) -> [UInt8]? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var out: [UInt8] = []
        for part in parts {
            guard !part.isEmpty, part.count <= 3, part.allSatisfy(\.isASCIIDigit),
                  !(part.count > 1 && part.first == "0"), let value = UInt8(part) else { return nil }
            out.append(value)
        }
        return out
    }

    static func parseIPv6(_ text: Substring) -> [UInt8]? {
        guard !text.isEmpty, !text.contains("%") else { return nil }
        let halves = text.components(separatedBy: "::")
        guard halves.count <= 2 else { return nil }
        func groups(_ part: String) -> [UInt8]? {
            if part.isEmpty { return [] }
            var out: [UInt8] = []
            let pieces = part.split(separator: ":", omittingEmptySubsequences: false)
            for (index, piece) in pieces.enumerated() {
                if index == pieces.count - 1, piece.contains(".") {
                    guard let v4 = parseIPv4(piece) else { return nil }
                    out += v4
                    continue
                }
                guard !piece.isEmpty, piece.count <= 4, let value = UInt16(piece, radix: 16) else { return nil }
                out += [UInt8(value >> 8), UInt8(value & 0xFF)]
            }
            return out
        }
        guard let head = groups(halves[0]) else { return nil }
        if halves.count == 1 { return head.count == 16 ? head : nil }
        guard let tail = groups(halves[1]), head.count + tail.count <= 14 else { return nil }
        return head + [UInt8](repeating: 0, count: 16 - head.count - tail.count) + tail
    }
}

extension Character {
    var isASCIIDigit: Bool { isASCII && isNumber }
}
