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
    /// together, each field, the rest of the head): a `writeString` per piece checked the
    /// buffer's room and uniqueness a dozen times per request. (One write of the whole head,
    /// sized by a first pass over the fields, cost more: each field is copied out of
    /// `HTTPFields` once per pass.)
    func writeHTTP1(into buffer: inout ByteBuffer) {
        let method = method.rawValue, authority = endpoint.authority
        var length = method.utf8.count + 1 + targetLength + " HTTP/1.1\r\nHost: ".utf8.count + authority.utf8.count + 2
        if let query { length += 1 + query.utf8.count }
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: length) { room in
            var out = ByteCursor(room, reserved: length)
            out.append(method)
            out.append(byte: UInt8(ascii: " "))
            writeTarget(into: &out)
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
        let tail = tailLength
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: tail) { room in
            var out = ByteCursor(room, reserved: tail)
            writeTail(into: &out)
            return out.offset
        }
        if bodyStream == nil, let body { buffer.writeImmutableBuffer(body) }
    }

    /// How many bytes ``writeTarget(into:)`` writes.
    private var targetLength: Int {
        guard let route else { return target.utf8.count }
        return endpoint.basePath.utf8.count + route.pathLength
    }

    /// ``target``, from the parts of its ``route`` when it has one (the string is never made).
    private func writeTarget(into out: inout ByteCursor) {
        guard let route else { return out.append(target) }
        out.append(endpoint.basePath)
        route.appendPath(to: &out)
    }

    /// At most how many bytes ``writeTail(into:)`` writes.
    private var tailLength: Int {
        var length = "Content-Length: ".utf8.count + 20 + 4  // longer than `Transfer-Encoding: chunked` CRLF CRLF
        if let trace { length += trace.fieldsLength }
        if let forwardedFor { length += "X-Forwarded-For: ".utf8.count + forwardedFor.utf8.count + 2 }
        return length
    }

    /// The head after the caller's fields, in one write (a write each cost more): the trace's
    /// fields (Veneer's `traceparent` in place of the caller's, and the caller's `tracestate`
    /// only with its trace continued: written here, the caller's fields never copied),
    /// `X-Forwarded-For`, the body's framing and the head's end.
    private func writeTail(into out: inout ByteCursor) {
        if let trace { trace.writeFields(into: &out) }
        if let forwardedFor {
            out.append("X-Forwarded-For: ")
            out.append(forwardedFor)
            out.append("\r\n")
        }
        if let bodyStream {
            if let length = bodyStream.expectedLength {
                out.append("Content-Length: ")
                out.appendDecimal(length)
                out.append("\r\n\r\n")
            } else {
                out.append("Transfer-Encoding: chunked\r\n\r\n")
            }
        } else if let body {
            out.append("Content-Length: ")
            out.appendDecimal(body.readableBytes)
            out.append("\r\n\r\n")
        } else {
            out.append("\r\n")
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
