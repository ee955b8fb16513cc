import Foundation
import HTTPTypes
import NIOCore
import VeneerCore

/// A stored response with what freshness needs (RFC 9111 §4.2.3): when it was received,
/// its corrected initial age, its freshness lifetime, its validators and its Vary keys.
///
/// One immutable object per stored response: every answer made from it shares its fields and
/// body, and a refresh stores a new entry rather than changing this one. Its stored
/// properties are kept few and small, since a cache holds tens of thousands of them: the usual
/// entry (no stale allowance, no `Vary`, a whole response) is this class alone, 88 bytes, and
/// one with any of those is a ``Fuller`` one (``make(code:headers:body:responseTime:initialAge:lifetime:noCache:mustRevalidate:fromWrite:staleIfError:staleWhileRevalidate:vary:part:headerBytes:)``
/// picks), 104 bytes. (88 bytes and glibc's 8-byte header take a chunk of 96, where 104 take 112.)
///
/// Not final, for that one subclass (this file's, and private); immutable, so sendable as
/// its stored properties are.
class CacheEntry: @unchecked Sendable {
    // Stored properties are laid out in this order, packed: 88 bytes with the object header.
    /// The status code (a 206 is a part of a response, see ``part``).
    final let code: UInt16
    private final let flags: Flags
    private final let storedSize: UInt32
    /// The stored fields, shared by every answer made from the entry.
    final let headers: ProxyHeaders
    /// The body (of the part, for a 206).
    final let body: ByteBuffer
    /// When the response was received.
    final let responseTime: Date
    /// Age when received: max(apparent age, Age header + response delay), in seconds.
    final let initialAge: Double
    /// How long it is fresh, in seconds.
    final let lifetime: Double

    /// An entry with what few entries have: stale allowances, Vary keys, a part's place.
    private final class Fuller: CacheEntry, @unchecked Sendable {
        let storedStaleIfError: Float
        let storedStaleWhileRevalidate: Float
        let extras: Extras?

        init(code: Int, headers: ProxyHeaders, body: ByteBuffer, responseTime: Date, initialAge: Double, lifetime: Double, flags: Flags,
             staleIfError: Double, staleWhileRevalidate: Double, vary: [(name: String, value: String?)], part: Part?, headerBytes: Int) {
            // Whole seconds from options and directives: a Float holds them exactly up to 2^24.
            storedStaleIfError = Float(staleIfError)
            storedStaleWhileRevalidate = Float(staleWhileRevalidate)
            extras = vary.isEmpty && part == nil ? nil : Extras(vary: vary, part: part)
            super.init(code: code, headers: headers, body: body, responseTime: responseTime, initialAge: initialAge, lifetime: lifetime,
                       flags: flags, headerBytes: headerBytes)
        }

        override var staleIfError: Double { Double(storedStaleIfError) }
        override var staleWhileRevalidate: Double { Double(storedStaleWhileRevalidate) }
        override var vary: [(name: String, value: String?)] { extras?.vary ?? [] }
        override var part: Part? { extras?.part }
    }

    /// The rarer facts of an entry, kept apart so that most entries need no room for them.
    private final class Extras: Sendable {
        let vary: [(name: String, value: String?)]
        let part: Part?

        init(vary: [(name: String, value: String?)], part: Part?) {
            self.vary = vary
            self.part = part
        }
    }

    struct Flags: OptionSet, Sendable {
        let rawValue: UInt8
        /// `no-cache`: always revalidate before use.
        static let noCache = Flags(rawValue: 1)
        /// `must-revalidate`/`proxy-revalidate`/`s-maxage`: never served stale.
        static let mustRevalidate = Flags(rawValue: 2)
        /// Stored from the answer to a write (write-through), not from a read.
        static let fromWrite = Flags(rawValue: 4)
    }

    /// The bytes a stored 206 holds: `first` up to `first + body length - 1` of `complete`.
    struct Part: Sendable, Equatable {
        let first: Int
        let complete: Int
    }

    private init(code: Int, headers: ProxyHeaders, body: ByteBuffer, responseTime: Date, initialAge: Double, lifetime: Double, flags: Flags,
                 headerBytes: Int) {
        self.code = UInt16(clamping: code)
        self.flags = flags
        storedSize = UInt32(clamping: body.readableBytes + headerBytes + 160)
        self.headers = headers
        self.body = body
        self.responseTime = responseTime
        self.initialAge = initialAge
        self.lifetime = lifetime
    }

    /// An entry: of this class alone when it has no stale allowance, no Vary keys and no part.
    static func make(code: Int, headers: ProxyHeaders, body: ByteBuffer, responseTime: Date, initialAge: Double, lifetime: Double,
                     noCache: Bool, mustRevalidate: Bool, fromWrite: Bool = false, staleIfError: Double, staleWhileRevalidate: Double,
                     vary: [(name: String, value: String?)], part: Part? = nil, headerBytes: Int) -> CacheEntry {
        var flags: Flags = []
        if noCache { flags.insert(.noCache) }
        if mustRevalidate { flags.insert(.mustRevalidate) }
        if fromWrite { flags.insert(.fromWrite) }
        guard Float(staleIfError) == 0, Float(staleWhileRevalidate) == 0, vary.isEmpty, part == nil else {
            return Fuller(code: code, headers: headers, body: body, responseTime: responseTime, initialAge: initialAge, lifetime: lifetime,
                          flags: flags, staleIfError: staleIfError, staleWhileRevalidate: staleWhileRevalidate, vary: vary, part: part,
                          headerBytes: headerBytes)
        }
        return CacheEntry(code: code, headers: headers, body: body, responseTime: responseTime, initialAge: initialAge, lifetime: lifetime,
                          flags: flags, headerBytes: headerBytes)
    }

    /// Seconds it may be served stale when the upstream fails (option or `stale-if-error`).
    var staleIfError: Double { 0 }
    /// Seconds it may be served stale while it is refreshed in the background.
    var staleWhileRevalidate: Double { 0 }
    /// The request header names of `Vary`, lower-case, and the values they had (normalised,
    /// RFC 9111 §4.1).
    var vary: [(name: String, value: String?)] { [] }
    /// For a stored 206: which bytes of the complete response the body holds.
    var part: Part? { nil }
    /// Bytes it occupies, roughly (for `max_bytes`), worked out once.
    var size: Int { Int(storedSize) }

    /// The same response with another body: a combination of parts (RFC 9111 §3.4).
    func replacing(body: ByteBuffer, part: Part?) -> CacheEntry {
        CacheEntry.make(code: part == nil ? 200 : 206, headers: headers, body: body, responseTime: responseTime, initialAge: initialAge,
                   lifetime: lifetime, noCache: noCache, mustRevalidate: mustRevalidate, fromWrite: fromWrite, staleIfError: staleIfError,
                   staleWhileRevalidate: staleWhileRevalidate, vary: vary, part: part, headerBytes: size - self.body.readableBytes - 160)
    }

    /// The same response holding `headers`, which must be equal to its own (another entry's,
    /// see ``SharedHeadersPool``). Its size is unchanged: each entry still counts its header
    /// fields, as if it held them alone.
    func sharing(_ headers: ProxyHeaders) -> CacheEntry {
        CacheEntry.make(code: Int(code), headers: headers, body: body, responseTime: responseTime, initialAge: initialAge, lifetime: lifetime,
                   noCache: noCache, mustRevalidate: mustRevalidate, fromWrite: fromWrite, staleIfError: staleIfError,
                   staleWhileRevalidate: staleWhileRevalidate, vary: vary, part: part, headerBytes: size - body.readableBytes - 160)
    }

    var status: HTTPResponse.Status { HTTPResponse.Status(code: Int(code)) }
    var noCache: Bool { flags.contains(.noCache) }
    var mustRevalidate: Bool { flags.contains(.mustRevalidate) }
    var fromWrite: Bool { flags.contains(.fromWrite) }
    /// Whether it is a whole response (not a stored part of one).
    var isComplete: Bool { part == nil }

    /// Current age (§4.2.3).
    func age(at now: Date) -> Double { initialAge + max(0, now.timeIntervalSince(responseTime)) }

    /// Seconds of freshness left (negative when stale).
    func ttl(at now: Date) -> Double { lifetime - age(at: now) }

    /// Whether it can be served without asking the upstream.
    func isFresh(at now: Date) -> Bool { !noCache && ttl(at: now) > 0 }

    var etag: String? { headers[.eTag] }
    var lastModified: String? { headers[.lastModified] }
    var hasValidators: Bool { headers.contains(.eTag) || headers.contains(.lastModified) }

    /// The entity tag when it is strong (RFC 9110 §8.8.3): what parts must share to be combined.
    var strongETag: String? {
        guard let tag = etag, !tag.hasPrefix("W/"), tag.hasPrefix("\""), tag.hasSuffix("\""), tag.utf8.count >= 2 else { return nil }
        return tag
    }

    /// When it is of no further use: stale beyond every stale allowance, and not worth
    /// revalidating after a day.
    var discardAfter: Date {
        let grace = max(staleIfError, staleWhileRevalidate, hasValidators ? 86_400 : 0)
        return responseTime.addingTimeInterval(max(0, lifetime - initialAge) + grace)
    }

    /// Whether the request's header values match those this response varies on.
    func matches(_ request: HTTPFields) -> Bool {
        let vary = vary
        return vary.isEmpty || vary.allSatisfy { CacheEntry.varyValue(request, $0.name) == $0.value }
    }

    /// Whether it was stored for the same selecting header values as `other`.
    func sameVariant(as other: CacheEntry) -> Bool {
        vary.count == other.vary.count && zip(vary, other.vary).allSatisfy { $0 == $1 }
    }

    /// A selecting header's value as compared (RFC 9111 §4.1): every field line of the name
    /// combined, with the whitespace around commas removed; nil when there is none.
    static func varyValue(_ fields: HTTPFields, _ name: String) -> String? {
        guard let fieldName = HTTPField.Name(name) else { return nil }
        let values = fields[values: fieldName]
        guard !values.isEmpty else { return nil }
        return values.flatMap { $0.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingSpaces } }
            .joined(separator: ",")
    }
}

// MARK: - Encoding for persistent stores

extension CacheEntry {
    static let formatVersion: UInt8 = 2

    /// A compact binary form: version, numbers, then length-prefixed strings and body.
    func encoded() -> [UInt8] {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(size + 64)
        buffer.writeInteger(CacheEntry.formatVersion)
        buffer.writeInteger(code)
        buffer.writeInteger(responseTime.timeIntervalSince1970.bitPattern)
        buffer.writeInteger(initialAge.bitPattern)
        buffer.writeInteger(lifetime.bitPattern)
        buffer.writeInteger(staleIfError.bitPattern)
        buffer.writeInteger(staleWhileRevalidate.bitPattern)
        buffer.writeInteger(flags.rawValue)
        buffer.writeInteger(UInt64(part?.first ?? 0))
        buffer.writeInteger(UInt64(part?.complete ?? 0))
        let fields = headers.fields
        buffer.writeInteger(UInt32(fields.count))
        for field in fields {
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
    static func decoded(_ bytes: [UInt8]) -> CacheEntry? {
        var buffer = ByteBuffer(bytes: bytes)
        guard buffer.readInteger(as: UInt8.self) == CacheEntry.formatVersion,
              let code = buffer.readInteger(as: UInt16.self),
              let responseTime = buffer.readInteger(as: UInt64.self).map(Double.init(bitPattern:)),
              let initialAge = buffer.readInteger(as: UInt64.self).map(Double.init(bitPattern:)),
              let lifetime = buffer.readInteger(as: UInt64.self).map(Double.init(bitPattern:)),
              let staleIfError = buffer.readInteger(as: UInt64.self).map(Double.init(bitPattern:)),
              let staleWhileRevalidate = buffer.readInteger(as: UInt64.self).map(Double.init(bitPattern:)),
              let flags = buffer.readInteger(as: UInt8.self).map(Flags.init(rawValue:)),
              let partFirst = buffer.readInteger(as: UInt64.self), let partComplete = buffer.readInteger(as: UInt64.self),
              partFirst < 1 << 40, partComplete < 1 << 40,
              let headerCount = buffer.readInteger(as: UInt32.self), headerCount < 10_000,
              // A store may be shared, or damaged: times and ages that no date or sum can hold are refused.
              [responseTime, initialAge, lifetime, staleIfError, staleWhileRevalidate].allSatisfy({ $0.isFinite && abs($0) < 1e12 }) else {
            return nil
        }
        var fields = HTTPFields()
        var headerBytes = 0
        for _ in 0..<headerCount {
            guard let name = Self.read(&buffer), let value = Self.read(&buffer), let fieldName = HTTPField.Name(name) else { return nil }
            fields.append(HTTPField(name: fieldName, value: value))
            headerBytes += name.utf8.count + value.utf8.count + 4
        }
        guard let varyCount = buffer.readInteger(as: UInt32.self), varyCount < 1000 else { return nil }
        var vary: [(name: String, value: String?)] = []
        for _ in 0..<varyCount {
            guard let name = Self.read(&buffer), let present = buffer.readInteger(as: UInt8.self), let value = Self.read(&buffer) else { return nil }
            vary.append((name, present == 1 ? value : nil))
        }
        guard let length = buffer.readInteger(as: UInt32.self), let body = buffer.readSlice(length: Int(length)), buffer.readableBytes == 0 else {
            return nil
        }
        let part = code == 206 ? Part(first: Int(partFirst), complete: Int(partComplete)) : nil
        if code == 206, part!.first + body.readableBytes > part!.complete { return nil }
        return make(code: Int(code), headers: ProxyHeaders(fields).sharedCopy(removing: []), body: CachePolicy.compact(body),
                    responseTime: Date(timeIntervalSince1970: responseTime), initialAge: initialAge, lifetime: lifetime,
                    noCache: flags.contains(.noCache), mustRevalidate: flags.contains(.mustRevalidate), fromWrite: flags.contains(.fromWrite),
                    staleIfError: staleIfError, staleWhileRevalidate: staleWhileRevalidate, vary: vary, part: part, headerBytes: headerBytes)
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
