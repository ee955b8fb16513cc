import HTTPTypes
import NIOCore
import VeneerCore

/// Writes a ``ProxyResponse`` as it goes on the wire, head and body in one buffer, so that a
/// response is one write on the socket and no HTTP part passes through further handlers.
///
/// On the wire: no hop-by-hop fields (nor those `Connection` names), `Content-Length` from
/// the body, no body for HEAD, 1xx, 204 and 304, a `Date` when the response has none, and
/// `Connection: close` when the connection ends after it. Field names and values are
/// already legal (`HTTPField` replaces CR, LF and NUL), so nothing can be injected here.
/// A streamed answer (server-sent events) is written as its head and first bytes, with no
/// `Content-Length`: its body goes on until the connection closes.
public enum HTTP1ResponseWriter {
    /// The interim answer to `Expect: 100-continue`.
    public static let continueResponse: StaticString = "HTTP/1.1 100 Continue\r\n\r\n"

    /// Appends the whole response to `buffer`, with `date` (IMF-fixdate, asked for only when
    /// the response has no `Date`). `streamed`: the body goes on after `response.body` until
    /// the connection closes (`close` must be true for a GET), so no `Content-Length` is written.
    /// A proxied streamed body (``ProxyResponse/stream``) is framed by `length` when it is
    /// known, else by `chunked` (then each part goes out after ``writeChunkHead(size:into:)``).
    public static func write(_ response: ProxyResponse, method: HTTPRequest.Method, close: Bool, streamed: Bool = false,
                             length: Int? = nil, chunked: Bool = false,
                             date: @autoclosure () -> String, into buffer: inout ByteBuffer) {
        assert(!streamed || close || method == .head || length != nil || chunked, "a streamed body without a length ends with the connection")
        let code = response.status.code
        let bodyless = code == 204 || code == 304 || (100..<200).contains(code)
        // The usual answer (no Connection field among its fields) in one pass: its size
        // reckoned, then written in place. Writing it piece by piece checked the buffer's
        // capacity at every piece: a sixth of a cache hit's instructions (callgrind).
        let written: Bool
        switch response.headers.wire {
        case .shared(let storage, let appendedFields):
            let lines = storage.lines(orMake: SerializedFields.lines(of:))
            // Read through a pointer: fewer copies of the fields than iterating the array (callgrind).
            written = !lines.sawConnection && appendedFields.withUnsafeBufferPointer { appended in
                writeInOnePass(response, code: code, bodyless: bodyless, lines: lines, fields: appended, method: method, close: close,
                               streamed: streamed, length: length, chunked: chunked, date: date, into: &buffer)
            }
        case .fields(let fields):
            written = writeInOnePass(response, code: code, bodyless: bodyless, lines: nil, fields: fields, method: method, close: close,
                                     streamed: streamed, length: length, chunked: chunked, date: date, into: &buffer)
        }
        guard !written else { return }
        writePieceByPiece(response, method: method, close: close, streamed: streamed, length: length, chunked: chunked, date: date(), into: &buffer)
    }

    /// ``write(_:method:close:streamed:length:chunked:date:into:)`` a piece at a time: for an
    /// answer with a `Connection` field (whose fields are then written again without those it
    /// names), and for the tests, which compare it with the one-pass writing.
    static func writePieceByPiece(_ response: ProxyResponse, method: HTTPRequest.Method, close: Bool, streamed: Bool = false,
                                  length: Int? = nil, chunked: Bool = false,
                                  date: @autoclosure () -> String, into buffer: inout ByteBuffer) {
        let code = response.status.code
        let bodyless = code == 204 || code == 304 || (100..<200).contains(code)
        buffer.writeStaticString("HTTP/1.1 ")
        writeStatus(code, reason: response.status.reasonPhrase, into: &buffer)

        // Fields as they are: shared ones (an upstream answer's lines, a cached entry's
        // fields serialized once and kept with them) copied as one buffer, then any appended
        // to them. Only if a Connection field turns up (rare: the origins drop theirs) are
        // they written again without the fields it names.
        let fieldsStart = buffer.writerIndex
        var hasDate: Bool
        var declaredLength: String?
        var sawConnection: Bool
        switch response.headers.wire {
        case .fields(let fields):
            (hasDate, declaredLength, sawConnection) = SerializedFields.write(fields, skipping: nil, into: &buffer)
        case .shared(let storage, let appendedFields):
            let lines = storage.lines(orMake: SerializedFields.lines(of:))
            buffer.writeBytes(lines.bytes)
            let appended = SerializedFields.write(appendedFields, into: &buffer)
            hasDate = lines.hasDate || appended.hasDate
            declaredLength = appended.declaredLength ?? lines.declaredLength
            sawConnection = lines.sawConnection || appended.sawConnection
        }
        if sawConnection {
            let fields = response.headers.fields
            buffer.moveWriterIndex(to: fieldsStart)
            (hasDate, declaredLength, _) = SerializedFields.write(fields, skipping: namedByConnection(fields), into: &buffer)
        }
        if !bodyless, streamed, let length {
            buffer.writeStaticString("Content-Length: ")
            writeDecimal(length, into: &buffer)
            buffer.writeStaticString("\r\n")
        } else if !bodyless, streamed, chunked {
            buffer.writeStaticString("Transfer-Encoding: chunked\r\n")
        }
        if !bodyless, !streamed {
            buffer.writeStaticString("Content-Length: ")
            // A HEAD answer passed through says how long the GET answer would be.
            if method == .head, response.body.readableBytes == 0, let declaredLength, !declaredLength.isEmpty,
               declaredLength.utf8.count <= 18, declaredLength.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
                buffer.writeString(declaredLength)
            } else {
                writeDecimal(response.body.readableBytes, into: &buffer)
            }
            buffer.writeStaticString("\r\n")
        }
        if !hasDate {
            buffer.writeStaticString("Date: ")
            buffer.writeString(date())
            buffer.writeStaticString("\r\n")
        }
        if close { buffer.writeStaticString("Connection: close\r\n") }
        buffer.writeStaticString("\r\n")
        if !bodyless, method != .head {
            buffer.writeImmutableBuffer(response.body)
        }
    }

    /// ``write(_:method:close:streamed:length:chunked:date:into:)`` in one pass, unless a
    /// `Connection` field is among `fields` (then nothing is written, and false returned): the
    /// facts of the fields are read first, the head's size reckoned from them, and the head
    /// written in place, then the body. The same bytes as the piece-by-piece writing below
    /// (ResponseWriterTests compare the two).
    @inline(__always)
    static func writeInOnePass<Fields: Sequence<HTTPField>>(
        _ response: ProxyResponse, code: Int, bodyless: Bool, lines: FieldLines?, fields: Fields, method: HTTPRequest.Method, close: Bool,
        streamed: Bool, length: Int?, chunked: Bool, date: () -> String, into buffer: inout ByteBuffer
    ) -> Bool {
        var hasDate = lines?.hasDate ?? false
        var declaredLength: String?
        var size = 0
        for field in fields {
            if HopByHop.isRemoved(field.name.canonicalName) {
                if field.name == .connection { return false }
                if field.name == .contentLength { declaredLength = field.value }
                continue
            }
            if field.name == .date { hasDate = true }
            size += field.name.rawName.utf8.count + field.value.utf8.count + 4
        }
        if declaredLength == nil { declaredLength = lines?.declaredLength }
        let clamped = min(max(code, 0), 999)
        let standard = standardReason(clamped)
        let reason = response.status.reasonPhrase
        size += 15 + (standard?.utf8CodeUnitCount ?? reason.utf8.count)
        size += lines?.bytes.count ?? 0
        // A HEAD answer passed through says how long the GET answer would be.
        var passedLength: String?
        if !bodyless, !streamed, method == .head, response.body.readableBytes == 0, let declaredLength, !declaredLength.isEmpty,
           declaredLength.utf8.count <= 18, declaredLength.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
            passedLength = declaredLength
        }
        size += 16 + 20 + 2 + 28
        let dateText = hasDate ? nil : date()
        if let dateText { size += 8 + dateText.utf8.count }
        if close { size += 19 }
        size += 2
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: size) { raw in
            var head = ByteCursor(raw, reserved: size)
            head.append("HTTP/1.1 ")
            head.append(byte: UInt8(truncatingIfNeeded: clamped / 100) + UInt8(ascii: "0"))
            head.append(byte: UInt8(truncatingIfNeeded: (clamped / 10) % 10) + UInt8(ascii: "0"))
            head.append(byte: UInt8(truncatingIfNeeded: clamped % 10) + UInt8(ascii: "0"))
            head.append(byte: UInt8(ascii: " "))
            if let standard {
                head.append(standard)
            } else {
                for byte in reason.utf8 { head.append(byte: byte < 0x20 && byte != 0x09 || byte == 0x7F ? UInt8(ascii: " ") : byte) }
            }
            head.append(byte: UInt8(ascii: "\r"), UInt8(ascii: "\n"))
            if let lines { head.append(lines.bytes) }
            // Separators as two stores each (a literal copied by memcpy cost some 40 instructions).
            for field in fields where !HopByHop.isRemoved(field.name.canonicalName) {
                head.append(field.name.rawName)
                head.append(byte: UInt8(ascii: ":"), UInt8(ascii: " "))
                head.append(field.value)
                head.append(byte: UInt8(ascii: "\r"), UInt8(ascii: "\n"))
            }
            if !bodyless, streamed, let length {
                head.append("Content-Length: ")
                head.appendDecimal(max(length, 0))
                head.append("\r\n")
            } else if !bodyless, streamed, chunked {
                head.append("Transfer-Encoding: chunked\r\n")
            }
            if !bodyless, !streamed {
                head.append("Content-Length: ")
                if let passedLength { head.append(passedLength) } else { head.appendDecimal(max(response.body.readableBytes, 0)) }
                head.append(byte: UInt8(ascii: "\r"), UInt8(ascii: "\n"))
            }
            if let dateText {
                head.append("Date: ")
                head.append(dateText)
                head.append("\r\n")
            }
            if close { head.append("Connection: close\r\n") }
            head.append(byte: UInt8(ascii: "\r"), UInt8(ascii: "\n"))
            return head.offset
        }
        if !bodyless, method != .head {
            buffer.writeImmutableBuffer(response.body)
        }
        return true
    }

    /// The size line of one chunk of a chunked body (its data and CRLF follow); a size of 0
    /// writes the last chunk and the end of the body.
    public static func writeChunkHead(size: Int, into buffer: inout ByteBuffer) {
        if size == 0 {
            buffer.writeStaticString("0\r\n\r\n")
            return
        }
        buffer.writeString(String(size, radix: 16))
        buffer.writeStaticString("\r\n")
    }

    /// `200 OK\r\n`: three digits, then the reason phrase: the standard one of a registered
    /// status (whatever the upstream or a stored answer said, as nginx does: an answer read
    /// back from a cache or a HAR file has none of its own), else the one given, with control
    /// characters as spaces.
    static func writeStatus(_ code: Int, reason: String, into buffer: inout ByteBuffer) {
        let clamped = min(max(code, 0), 999)
        buffer.writeInteger(UInt8(truncatingIfNeeded: clamped / 100) + UInt8(ascii: "0"))
        buffer.writeInteger(UInt8(truncatingIfNeeded: (clamped / 10) % 10) + UInt8(ascii: "0"))
        buffer.writeInteger(UInt8(truncatingIfNeeded: clamped % 10) + UInt8(ascii: "0"))
        buffer.writeInteger(UInt8(ascii: " "))
        if let standard = standardReason(clamped) {
            buffer.writeStaticString(standard)
        } else {
            for byte in reason.utf8 {
                buffer.writeInteger(byte < 0x20 && byte != 0x09 || byte == 0x7F ? UInt8(ascii: " ") : byte)
            }
        }
        buffer.writeStaticString("\r\n")
    }

    /// The reason phrase of a status in IANA's HTTP Status Code Registry (RFC 9110 §15 and the
    /// RFCs it lists), nil for any other.
    static func standardReason(_ code: Int) -> StaticString? {
        switch code {
        case 100: "Continue"
        case 101: "Switching Protocols"
        case 102: "Processing"
        case 103: "Early Hints"
        case 200: "OK"
        case 201: "Created"
        case 202: "Accepted"
        case 203: "Non-Authoritative Information"
        case 204: "No Content"
        case 205: "Reset Content"
        case 206: "Partial Content"
        case 207: "Multi-Status"
        case 208: "Already Reported"
        case 226: "IM Used"
        case 300: "Multiple Choices"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 303: "See Other"
        case 304: "Not Modified"
        case 305: "Use Proxy"
        case 307: "Temporary Redirect"
        case 308: "Permanent Redirect"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 402: "Payment Required"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 406: "Not Acceptable"
        case 407: "Proxy Authentication Required"
        case 408: "Request Timeout"
        case 409: "Conflict"
        case 410: "Gone"
        case 411: "Length Required"
        case 412: "Precondition Failed"
        case 413: "Content Too Large"
        case 414: "URI Too Long"
        case 415: "Unsupported Media Type"
        case 416: "Range Not Satisfiable"
        case 417: "Expectation Failed"
        case 421: "Misdirected Request"
        case 422: "Unprocessable Content"
        case 423: "Locked"
        case 424: "Failed Dependency"
        case 425: "Too Early"
        case 426: "Upgrade Required"
        case 428: "Precondition Required"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 451: "Unavailable For Legal Reasons"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        case 505: "HTTP Version Not Supported"
        case 506: "Variant Also Negotiates"
        case 507: "Insufficient Storage"
        case 508: "Loop Detected"
        case 510: "Not Extended"
        case 511: "Network Authentication Required"
        default: nil
        }
    }

    static func writeDecimal(_ value: Int, into buffer: inout ByteBuffer) {
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                     UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var remaining = max(value, 0)
        var count = 0
        withUnsafeMutableBytes(of: &digits) { raw in
            repeat {
                raw[19 - count] = UInt8(remaining % 10) + UInt8(ascii: "0")
                remaining /= 10
                count += 1
            } while remaining > 0
            buffer.writeBytes(UnsafeRawBufferPointer(rebasing: raw[(20 - count)...]))
        }
    }

    /// The lower-case names the `Connection` fields list.
    static func namedByConnection(_ headers: HTTPFields) -> [String] {
        headers[values: .connection].flatMap { value in
            value.split(separator: ",").map { $0.trimmingSpaces.lowercased() }.filter { !$0.isEmpty }
        }
    }
}
