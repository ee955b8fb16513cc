import Foundation
import HTTPTypes
import NIOCore
import VeneerCore

/// A stored response with what freshness needs (RFC 9111 §4.2.3): when it was received,
/// its corrected initial age, its freshness lifetime, its validators and its Vary keys.
struct CacheEntry: Sendable {
    var status: HTTPResponse.Status
    /// The stored fields, shared by every answer made from the entry.
    var headers: ProxyHeaders
    var body: ByteBuffer
    /// When the response was received.
    var responseTime: Date
    /// Age when received: max(apparent age, Age header + response delay), in seconds.
    var initialAge: Double
    /// How long it is fresh, in seconds.
    var lifetime: Double
    /// `no-cache`: always revalidate before use.
    var noCache: Bool
    /// `must-revalidate`/`proxy-revalidate`/`s-maxage`: never served stale.
    var mustRevalidate: Bool
    /// Seconds it may be served stale when the upstream fails (option or `stale-if-error`).
    var staleIfError: Double
    /// Seconds it may be served stale while it is refreshed in the background.
    var staleWhileRevalidate: Double
    /// The request header names of `Vary`, lower-case, and the values they had.
    var vary: [(name: String, value: String?)]

    /// Current age (§4.2.3).
    func age(at now: Date) -> Double { initialAge + max(0, now.timeIntervalSince(responseTime)) }

    /// Seconds of freshness left (negative when stale).
    func ttl(at now: Date) -> Double { lifetime - age(at: now) }

    /// Whether it can be served without asking the upstream.
    func isFresh(at now: Date) -> Bool { !noCache && ttl(at: now) > 0 }

    var etag: String? { headers[.eTag] }
    var lastModified: String? { headers[.lastModified] }
    var hasValidators: Bool { headers.contains(.eTag) || headers.contains(.lastModified) }

    /// Bytes it occupies, roughly: body, header text and bookkeeping.
    var size: Int {
        let text = headers.reduce(0) { $0 + $1.name.rawName.utf8.count + $1.value.utf8.count + 4 }
        // The fields count twice: shared headers also keep the form the server sends them in.
        return body.readableBytes + 2 * text + 160
    }

    /// When it is of no further use: stale beyond every stale allowance, and not worth
    /// revalidating after a day.
    var discardAfter: Date {
        let grace = max(staleIfError, staleWhileRevalidate, hasValidators ? 86_400 : 0)
        return responseTime.addingTimeInterval(max(0, lifetime - initialAge) + grace)
    }

    /// Whether the request's header values match those this response varies on.
    func matches(_ request: HTTPFields) -> Bool {
        vary.allSatisfy { CacheEntry.varyValue(request, $0.name) == $0.value }
    }

    static func varyValue(_ fields: HTTPFields, _ name: String) -> String? {
        guard let fieldName = HTTPField.Name(name) else { return nil }
        let values = fields[values: fieldName]
        return values.isEmpty ? nil : values.joined(separator: ",")
    }
}

// MARK: - Encoding for persistent stores

extension CacheEntry {
    static let formatVersion: UInt8 = 1

    /// A compact binary form: version, numbers, then length-prefixed strings and body.
    func encoded() -> [UInt8] {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(size + 64)
        buffer.writeInteger(CacheEntry.formatVersion)
        buffer.writeInteger(UInt16(status.code))
        buffer.writeInteger(responseTime.timeIntervalSince1970.bitPattern)
        buffer.writeInteger(initialAge.bitPattern)
        buffer.writeInteger(lifetime.bitPattern)
        buffer.writeInteger(staleIfError.bitPattern)
        buffer.writeInteger(staleWhileRevalidate.bitPattern)
        buffer.writeInteger(UInt8((noCache ? 1 : 0) | (mustRevalidate ? 2 : 0)))
        buffer.writeInteger(UInt32(headers.count))
        for field in headers {
            Self.write(field.name.rawName, &buffer)
            Self.write(field.value, &buffer)
        }
        buffer.writeInteger(UInt32(vary.count))
        for item in vary {
            Self.write(item.name, &buffer)
            buffer.writeInteger(UInt8(item.value == nil ? 0 : 1))
            Self.write(item.value ?? "", &buffer)
        }
        buffer.writeInteger(UInt32(body.readableBytes))
        buffer.writeImmutableBuffer(body)
        return Array(buffer.readableBytesView)
    }

    /// Reads the binary form; nil for anything damaged or of another version.
    init?(decoding bytes: [UInt8]) {
        var buffer = ByteBuffer(bytes: bytes)
        guard buffer.readInteger(as: UInt8.self) == CacheEntry.formatVersion,
              let code = buffer.readInteger(as: UInt16.self),
              let responseTime = buffer.readInteger(as: UInt64.self).map(Double.init(bitPattern:)),
              let initialAge = buffer.readInteger(as: UInt64.self).map(Double.init(bitPattern:)),
              let lifetime = buffer.readInteger(as: UInt64.self).map(Double.init(bitPattern:)),
              let staleIfError = buffer.readInteger(as: UInt64.self).map(Double.init(bitPattern:)),
              let staleWhileRevalidate = buffer.readInteger(as: UInt64.self).map(Double.init(bitPattern:)),
              let flags = buffer.readInteger(as: UInt8.self),
              let headerCount = buffer.readInteger(as: UInt32.self), headerCount < 10_000 else { return nil }
        var headers = HTTPFields()
        for _ in 0..<headerCount {
            guard let name = Self.read(&buffer), let value = Self.read(&buffer), let fieldName = HTTPField.Name(name) else { return nil }
            headers.append(HTTPField(name: fieldName, value: value))
        }
        guard let varyCount = buffer.readInteger(as: UInt32.self), varyCount < 1000 else { return nil }
        var vary: [(String, String?)] = []
        for _ in 0..<varyCount {
            guard let name = Self.read(&buffer), let present = buffer.readInteger(as: UInt8.self), let value = Self.read(&buffer) else { return nil }
            vary.append((name, present == 1 ? value : nil))
        }
        guard let length = buffer.readInteger(as: UInt32.self), let body = buffer.readSlice(length: Int(length)), buffer.readableBytes == 0 else {
            return nil
        }
        self.init(status: HTTPResponse.Status(code: Int(code)), headers: ProxyHeaders(shared: headers), body: body,
                  responseTime: Date(timeIntervalSince1970: responseTime), initialAge: initialAge, lifetime: lifetime,
                  noCache: flags & 1 != 0, mustRevalidate: flags & 2 != 0, staleIfError: staleIfError,
                  staleWhileRevalidate: staleWhileRevalidate, vary: vary)
    }

    private static func write(_ text: String, _ buffer: inout ByteBuffer) {
        buffer.writeInteger(UInt32(text.utf8.count))
        buffer.writeString(text)
    }

    private static func read(_ buffer: inout ByteBuffer) -> String? {
        guard let length = buffer.readInteger(as: UInt32.self), length < 16 << 20 else { return nil }
        return buffer.readString(length: Int(length))
    }
}
