import Foundation

/// Bytes written in place into room reserved for them beforehand (a `ByteBuffer`'s
/// `writeWithUnsafeMutableBytes(minimumWritableBytes:_:)`): for the texts made on every
/// request (a response's head, a `latency_log` line), whose pieces each checked the buffer's
/// capacity when written one at a time. A release build checks nothing: the caller reserves
/// enough (each method says at most how many bytes it writes); a debug build (every test)
/// stops at the first byte a write would put past the room.
package struct ByteCursor {
    private let base: UnsafeMutableRawPointer
    /// The room's size, checked by every write in a debug build.
    private let capacity: Int
    /// How many bytes were written.
    package private(set) var offset = 0

    /// Writes into `room` from its start; a debug build checks that at most `reserved` bytes
    /// (the caller's reckoning; the whole room when nil) are written.
    package init(_ room: UnsafeMutableRawBufferPointer, reserved: Int? = nil) {
        self.base = room.baseAddress!
        self.capacity = min(room.count, reserved ?? room.count)
    }

    /// Asserts that `count` more bytes fit in the room.
    @inline(__always)
    private func assertRoom(for count: Int) {
        assert(offset + count <= capacity, "ByteCursor: \(count) bytes at \(offset) outgrow a room of \(capacity)")
    }

    /// One byte.
    @inline(__always)
    package mutating func append(byte: UInt8) {
        assertRoom(for: 1)
        base.storeBytes(of: byte, toByteOffset: offset, as: UInt8.self)
        offset += 1
    }

    /// Two bytes (`": "`, `"\r\n"`): stored, not copied from a literal by `memcpy`.
    @inline(__always)
    package mutating func append(byte first: UInt8, _ second: UInt8) {
        assertRoom(for: 2)
        base.storeBytes(of: first, toByteOffset: offset, as: UInt8.self)
        base.storeBytes(of: second, toByteOffset: offset + 1, as: UInt8.self)
        offset += 2
    }

    /// The text's bytes. (Through `withUTF8Buffer`: a one-character static string has no
    /// pointer, and its `utf8Start` traps.)
    @inline(__always)
    package mutating func append(_ text: StaticString) {
        text.withUTF8Buffer { bytes in
            assertRoom(for: bytes.count)
            if let start = bytes.baseAddress { (base + offset).copyMemory(from: start, byteCount: bytes.count) }
            offset += bytes.count
        }
    }

    /// The bytes.
    @inline(__always)
    package mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append(raw: $0) }
    }

    /// The text's UTF-8 bytes, as they are.
    @inline(__always)
    package mutating func append(_ text: String) {
        let copied: Void? = text.utf8.withContiguousStorageIfAvailable { append(raw: UnsafeRawBufferPointer($0)) }
        if copied == nil {
            for byte in text.utf8 { append(byte: byte) }
        }
    }

    /// The bytes.
    @inline(__always)
    package mutating func append(raw: UnsafeRawBufferPointer) {
        guard let source = raw.baseAddress, raw.count > 0 else { return }
        assertRoom(for: raw.count)
        (base + offset).copyMemory(from: source, byteCount: raw.count)
        offset += raw.count
    }

    /// `value` in decimal: at most 20 bytes.
    package mutating func appendDecimal(_ value: Int) {
        if value < 0 { append(byte: UInt8(ascii: "-")) }
        let magnitude = value.magnitude
        var scale: UInt = 1
        while magnitude / scale >= 10 { scale *= 10 }
        while scale > 0 {
            append(byte: UInt8(truncatingIfNeeded: (magnitude / scale) % 10) + UInt8(ascii: "0"))
            scale /= 10
        }
    }

    /// `text` as a JSON string literal, quotes included, escaped as ``JSONText/writeQuoted(_:into:)``
    /// escapes it: at most ``jsonQuotedLength(_:)`` bytes.
    package mutating func appendJSONQuoted(_ text: String) {
        append(byte: UInt8(ascii: "\""))
        // Contiguous text (every native string, also a small one) is scanned through a pointer
        // and copied whole up to each byte to escape: a byte loop over a `UTF8View` cost some
        // 25 instructions a byte, a latency_log line's three quoted texts 1,700 (callgrind).
        let copied: Void? = text.utf8.withContiguousStorageIfAvailable { bytes in
            var start = 0
            for index in bytes.indices where bytes[index] < 0x20 || bytes[index] == UInt8(ascii: "\"") || bytes[index] == UInt8(ascii: "\\") {
                append(raw: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes[start..<index])))
                appendEscaped(bytes[index])
                start = index + 1
            }
            append(raw: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes[start...])))
        }
        if copied == nil {
            for byte in text.utf8 { appendEscaped(byte) }
        }
        append(byte: UInt8(ascii: "\""))
    }

    /// One byte of a JSON string literal's content, escaped when it must be.
    @inline(__always)
    private mutating func appendEscaped(_ byte: UInt8) {
        switch byte {
        case UInt8(ascii: "\""): append("\\\"")
        case UInt8(ascii: "\\"): append("\\\\")
        case 0x0A: append("\\n")
        case 0x0D: append("\\r")
        case 0x09: append("\\t")
        case 0..<0x20:
            let hex: StaticString = "0123456789abcdef"
            append("\\u00")
            append(byte: hex.utf8Start[Int(byte >> 4)])
            append(byte: hex.utf8Start[Int(byte & 0xF)])
        default: append(byte: byte)
        }
    }

    /// At most how many bytes ``appendJSONQuoted(_:)`` writes for `text`.
    package static func jsonQuotedLength(_ text: String) -> Int {
        text.utf8.count * 6 + 2
    }

    /// Runs `write` on room for `count` bytes at the cursor; it returns how many it wrote.
    package mutating func append(upTo count: Int, _ write: (UnsafeMutableRawBufferPointer) -> Int) {
        assertRoom(for: count)
        offset += write(UnsafeMutableRawBufferPointer(start: base + offset, count: count))
    }
}
