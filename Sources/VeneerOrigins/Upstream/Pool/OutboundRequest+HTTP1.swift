import HTTPTypes
import NIOCore
import VeneerCore
import VeneerHTTP1

extension OutboundRequest {
    /// The request as HTTP/1.1, head and body in one buffer: `METHOD target[?query] HTTP/1.1`,
    /// `Host`, the end-to-end fields, ``OutboundRequest/trace``'s and ``OutboundRequest/forwardedFor``, `Content-Length`
    /// when there is a body, then the body. A streamed
    /// body (``OutboundRequest/bodyStream``) is not written here: the head says its
    /// `Content-Length` when known, else `Transfer-Encoding: chunked`, and ends.
    ///
    /// Each part is copied in one write of the buffer's room (the request line and `Host`
    /// together, each field, the end of the head): a `writeString` per piece checked the
    /// buffer's room and uniqueness a dozen times per request.
    func writeHTTP1(into buffer: inout ByteBuffer) {
        let method = method.rawValue, authority = endpoint.authority
        var length = method.utf8.count + 1 + target.utf8.count + " HTTP/1.1\r\nHost: ".utf8.count + authority.utf8.count + 2
        if let query { length += 1 + query.utf8.count }
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: length) { room in
            var out = ByteCursor(room, reserved: length)
            out.append(method)
            out.append(byte: UInt8(ascii: " "))
            out.append(target)
            if let query {
                out.append(byte: UInt8(ascii: "?"))
                out.append(query)
            }
            out.append(" HTTP/1.1\r\nHost: ")
            out.append(authority)
            out.append("\r\n")
            return out.offset
        }
        let traced = trace != nil
        for field in headers {
            let name = field.name.canonicalName
            if HopByHop.isRemoved(name) || name == "host" || traced && OutgoingTrace.replaces(name) { continue }
            Self.write(field.name.rawName, field.value, into: &buffer)
        }
        if let trace {
            // Veneer's `traceparent` in place of the caller's (and the caller's `tracestate`
            // only with its trace continued): written here, the caller's fields never copied.
            let length = trace.fieldsLength
            buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: length) { room in
                var out = ByteCursor(room, reserved: length)
                trace.writeFields(into: &out)
                return out.offset
            }
        }
        if let forwardedFor { Self.write("X-Forwarded-For", forwardedFor, into: &buffer) }
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
    private static func write(_ name: String, _ value: String, into buffer: inout ByteBuffer) {
        let length = name.utf8.count + value.utf8.count + 4
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: length) { room in
            var out = ByteCursor(room, reserved: length)
            out.append(name)
            out.append(": ")
            out.append(value)
            out.append("\r\n")
            return out.offset
        }
    }
}
