import NIOCore

extension ProxyError {
    /// The error as the response the edge sends: JSON body, `Content-Type`, extra headers.
    public var response: ProxyResponse { response(requestID: nil) }

    /// ``response`` with the request id in the body too (`"request_id"`): what a caller quotes
    /// to an operator, who finds the detail in the daemon log by it.
    public func response(requestID: String?) -> ProxyResponse {
        var body = ByteBuffer()
        body.writeStaticString("{\"error\":\"")
        body.writeString(code.rawValue)
        body.writeStaticString("\",\"message\":")
        JSONText.writeQuoted(message, into: &body)
        if let requestID {
            body.writeStaticString(",\"request_id\":")
            JSONText.writeQuoted(requestID, into: &body)
        }
        body.writeStaticString("}\n")
        return .json(status, body, headers: ProxyHeaders(headers))
    }
}

/// Minimal JSON text helpers for the few places that write JSON by hand on a hot path.
public enum JSONText {
    /// Writes `text` as a JSON string literal (with quotes), escaping what RFC 8259 requires.
    public static func writeQuoted(_ text: String, into buffer: inout ByteBuffer) {
        // The usual text needs no escape: written whole, quotes included, in one pass (walking
        // the view's indices cost a latency_log line some 4,000 instructions, callgrind).
        let whole: Bool? = text.utf8.withContiguousStorageIfAvailable { bytes in
            for byte in bytes where byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { return false }
            buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: bytes.count + 2) { out in
                out[0] = UInt8(ascii: "\"")
                if let start = bytes.baseAddress, bytes.count > 0 { (out.baseAddress! + 1).copyMemory(from: start, byteCount: bytes.count) }
                out[bytes.count + 1] = UInt8(ascii: "\"")
                return bytes.count + 2
            }
            return true
        }
        if whole == true { return }
        buffer.writeInteger(UInt8(ascii: "\""))
        var start = text.utf8.startIndex
        var index = start
        let utf8 = text.utf8
        while index != utf8.endIndex {
            let byte = utf8[index]
            let escape: StaticString?
            switch byte {
            case UInt8(ascii: "\""): escape = "\\\""
            case UInt8(ascii: "\\"): escape = "\\\\"
            case 0x0A: escape = "\\n"
            case 0x0D: escape = "\\r"
            case 0x09: escape = "\\t"
            case 0..<0x20: escape = nil
            default:
                index = utf8.index(after: index)
                continue
            }
            buffer.writeSubstring(Substring(utf8[start..<index]))
            if let escape {
                buffer.writeStaticString(escape)
            } else {
                let hex: [UInt8] = Array("0123456789abcdef".utf8)
                buffer.writeStaticString("\\u00")
                buffer.writeInteger(hex[Int(byte >> 4)])
                buffer.writeInteger(hex[Int(byte & 0xF)])
            }
            index = utf8.index(after: index)
            start = index
        }
        buffer.writeSubstring(Substring(utf8[start..<index]))
        buffer.writeInteger(UInt8(ascii: "\""))
    }

    /// `text` as a JSON string literal.
    public static func quoted(_ text: String) -> String {
        var buffer = ByteBuffer()
        writeQuoted(text, into: &buffer)
        return String(buffer: buffer)
    }
}
