import HTTPTypes
import NIOCore
import VeneerCore
import VeneerHTTP1

extension OutboundRequest {
    /// The request as HTTP/1.1, head and body in one buffer: `METHOD target[?query] HTTP/1.1`,
    /// `Host`, the end-to-end fields and ``OutboundRequest/forwardedFor``, `Content-Length`
    /// when there is a body, then the body. A streamed
    /// body (``OutboundRequest/bodyStream``) is not written here: the head says its
    /// `Content-Length` when known, else `Transfer-Encoding: chunked`, and ends.
    ///
    /// Each part is copied in one write of the buffer's room (the request line and `Host`
    /// together, each field, the end of the head): a `writeString` per piece checked the
    /// buffer's room and uniqueness a dozen times per request.
    func writeHTTP1(into buffer: inout ByteBuffer) {
        let methodBytes = method.rawValue.utf8, targetBytes = target.utf8, authority = endpoint.authority.utf8
        var length = methodBytes.count + 1 + targetBytes.count + " HTTP/1.1\r\nHost: ".utf8.count + authority.count + 2
        if let query { length += 1 + query.utf8.count }
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: length) { room in
            var out = HeadBytes(room)
            out.put(methodBytes)
            out.put(UInt8(ascii: " "))
            out.put(targetBytes)
            if let query {
                out.put(UInt8(ascii: "?"))
                out.put(query.utf8)
            }
            out.put(" HTTP/1.1\r\nHost: ")
            out.put(authority)
            out.put("\r\n")
            return out.count
        }
        for field in headers {
            let name = field.name.canonicalName
            if HopByHop.isRemoved(name) || name == "host" { continue }
            Self.write(field.name.rawName.utf8, field.value.utf8, into: &buffer)
        }
        if let forwardedFor { Self.write("X-Forwarded-For".utf8, forwardedFor.utf8, into: &buffer) }
        if let bodyStream {
            if let length = bodyStream.expectedLength {
                buffer.writeStaticString("Content-Length: ")
                buffer.writeString(String(length))
                buffer.writeStaticString("\r\n\r\n")
            } else {
                buffer.writeStaticString("Transfer-Encoding: chunked\r\n\r\n")
            }
        } else if let body {
            buffer.writeStaticString("Content-Length: ")
            buffer.writeString(String(body.readableBytes))
            buffer.writeStaticString("\r\n\r\n")
            buffer.writeImmutableBuffer(body)
        } else {
            buffer.writeStaticString("\r\n")
        }
    }

    /// `name: value` CRLF, in one write.
    private static func write(_ name: String.UTF8View, _ value: String.UTF8View, into buffer: inout ByteBuffer) {
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: name.count + value.count + 4) { room in
            var out = HeadBytes(room)
            out.put(name)
            out.put(": ")
            out.put(value)
            out.put("\r\n")
            return out.count
        }
    }
}

/// Bytes copied one after another into room known to be large enough (the caller sized it).
private struct HeadBytes {
    let room: UnsafeMutableRawBufferPointer
    var count = 0

    init(_ room: UnsafeMutableRawBufferPointer) {
        self.room = room
    }

    @inline(__always)
    mutating func put(_ byte: UInt8) {
        room[count] = byte
        count += 1
    }

    @inline(__always)
    mutating func put(_ text: StaticString) {
        // withUTF8Buffer: a one-character static string has no pointer (its utf8Start traps).
        text.withUTF8Buffer { bytes in
            UnsafeMutableRawBufferPointer(rebasing: room[count..<(count + bytes.count)]).copyMemory(from: UnsafeRawBufferPointer(bytes))
            count += bytes.count
        }
    }

    @inline(__always)
    mutating func put(_ text: String.UTF8View) {
        let length = text.count
        let copied: Void? = text.withContiguousStorageIfAvailable { bytes in
            UnsafeMutableRawBufferPointer(rebasing: room[count..<(count + length)]).copyMemory(from: UnsafeRawBufferPointer(bytes))
        }
        if copied == nil {
            // A bridged or foreign string: byte by byte.
            for byte in text { put(byte) }
        } else {
            count += length
        }
    }
}
