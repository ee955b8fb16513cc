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
    func writeHTTP1(into buffer: inout ByteBuffer) {
        buffer.writeString(method.rawValue)
        buffer.writeInteger(UInt8(ascii: " "))
        buffer.writeString(target)
        if let query {
            buffer.writeInteger(UInt8(ascii: "?"))
            buffer.writeString(query)
        }
        buffer.writeStaticString(" HTTP/1.1\r\nHost: ")
        buffer.writeString(endpoint.authority)
        buffer.writeStaticString("\r\n")
        for field in headers {
            let name = field.name.canonicalName
            if HopByHop.isRemoved(name) || name == "host" { continue }
            buffer.writeString(field.name.rawName)
            buffer.writeStaticString(": ")
            buffer.writeString(field.value)
            buffer.writeStaticString("\r\n")
        }
        if let forwardedFor {
            buffer.writeStaticString("X-Forwarded-For: ")
            buffer.writeString(forwardedFor)
            buffer.writeStaticString("\r\n")
        }
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
}
