import HTTPTypes
import NIOCore
import VeneerCore

/// Reads HTTP/1.1 responses off an upstream connection, straight into a ``ProxyResponse``
/// with the hop-by-hop fields (and those `Connection` names) already gone.
///
/// Framing follows RFC 9112 §6.3: no body after HEAD, 1xx, 204 and 304; `chunked` when it
/// is the last transfer coding; else `Content-Length`; else the body runs until the
/// connection closes (and the connection is not reused). Interim 1xx answers are skipped.
public struct HTTP1ResponseParser {
    /// A whole response.
    public struct Response: Sendable {
        /// The status, the end-to-end fields and the body.
        public var response: ProxyResponse
        /// Whether the connection may carry another request.
        public var keepAlive: Bool
    }

    private struct Head {
        var status: HTTPResponse.Status
        /// The kept fields: usually their lines as they came (made into fields only if asked for).
        var headers: ProxyHeaders
        var keepAlive: Bool
    }

    /// What the framing fields say of the body (all ``nextEvent(requestMethod:)`` needs of
    /// them: a plain value, passed on without the retains of the whole ``HTTP1Framing``).
    private struct BodyFraming {
        var contentLength: Int?
        var hasTransferEncoding: Bool
        var chunkedIsLast: Bool

        init(_ framing: borrowing HTTP1Framing) {
            contentLength = framing.contentLength
            hasTransferEncoding = framing.hasTransferEncoding
            chunkedIsLast = framing.chunkedIsLast
        }
    }

    /// What ``nextEvent(requestMethod:)`` read.
    public enum Event: Sendable {
        /// A whole response.
        case response(Response)
        /// The head of a response whose body streams (its length unknown, or over
        /// ``streamThreshold``): the body follows as ``part(_:)``s, then ``end(keepAlive:)``.
        case head(ProxyResponse, expectedLength: Int?)
        /// The next bytes of a streamed body.
        case part(ByteBuffer)
        /// The streamed body ended; `keepAlive`: the connection may carry another request.
        case end(keepAlive: Bool)
    }

    private enum State {
        case head
        case body(Head, remaining: Int, ByteBuffer)
        case chunked(Head, ChunkedDecoder, ByteBuffer)
        case untilClose(Head, ByteBuffer)
        /// A streamed body: so many bytes left, chunked, or until the close.
        case streamLength(keepAlive: Bool, remaining: Int)
        case streamChunked(keepAlive: Bool, ChunkedDecoder)
        case streamUntilClose
    }

    /// The largest header section.
    public let maxHeadSize: Int
    /// The largest body; more is an error.
    public var maxBodySize: Int
    /// Bodies of unknown length, and those longer than this, stream (``Event/head(_:expectedLength:)``)
    /// instead of being read whole; nil: every body is read whole (``next(requestMethod:)``).
    public var streamThreshold: Int?
    /// `limits.buffered`: with a ``streamThreshold``, a body to be read whole reserves its
    /// length here when its head arrives, and the whole response holds the reservation
    /// (``ProxyResponse/reservation``); a body the budget has no room for streams instead.
    public var budget: BufferBudget?
    private var reservation: BufferBudget.Reservation?
    private var input = ByteBuffer()
    private var scanned = 0
    private var state = State.head

    /// Creates a parser.
    public init(maxHeadSize: Int = 64 << 10, maxBodySize: Int) {
        self.maxHeadSize = maxHeadSize
        self.maxBodySize = maxBodySize
    }

    /// Adds bytes read from the connection.
    public mutating func append(_ chunk: ByteBuffer) {
        if input.readableBytes == 0 {
            input = chunk
        } else {
            var chunk = chunk
            input.writeBuffer(&chunk)
        }
    }

    /// Whether bytes are waiting that no response has taken (a peer talking out of turn, or
    /// a response still arriving).
    public var hasUnreadBytes: Bool { input.readableBytes > 0 }

    /// Forgets everything (before the connection carries the next request).
    public mutating func reset() {
        reservation = nil
        input = ByteBuffer()
        scanned = 0
        state = .head
    }

    /// The response once it has arrived whole, else nil. `requestMethod` is the method of
    /// the request it answers (HEAD answers have no body). Only without a ``streamThreshold``.
    public mutating func next(requestMethod: HTTPRequest.Method) throws(HTTP1ParseError) -> Response? {
        precondition(streamThreshold == nil, "a parser that streams is read with nextEvent")
        guard case .response(let response)? = try nextEvent(requestMethod: requestMethod) else { return nil }
        return response
    }

    /// What arrived next: a whole response, the head of a streamed one, a part of its body or
    /// its end; nil when more bytes are needed.
    public mutating func nextEvent(requestMethod: HTTPRequest.Method) throws(HTTP1ParseError) -> Event? {
        while true {
            switch state {
            case .head:
                guard let (head, framing, status) = try readHead(requestMethod: requestMethod) else { return nil }
                if (100..<200).contains(status) {
                    // An interim answer (100 Continue, 103 Early Hints): the real one follows.
                    guard status != 101 else { throw HTTP1ParseError("The upstream switched protocols.") }
                    continue
                }
                if requestMethod == .head || status == 204 || status == 304 {
                    return .response(finish(head, ByteBuffer()))
                }
                if let threshold = streamThreshold {
                    if framing.hasTransferEncoding {
                        state = framing.chunkedIsLast ? .streamChunked(keepAlive: head.keepAlive, ChunkedDecoder()) : .streamUntilClose
                        return .head(ProxyResponse(status: head.status, headers: head.headers), expectedLength: nil)
                    }
                    if let length = framing.contentLength {
                        if let budget, length > 0, length <= threshold {
                            reservation = budget.reserve(length)
                        }
                        if length > threshold || (budget != nil && length > 0 && reservation == nil) {
                            state = .streamLength(keepAlive: head.keepAlive, remaining: length)
                            return .head(ProxyResponse(status: head.status, headers: head.headers), expectedLength: length)
                        }
                    } else {
                        state = .streamUntilClose
                        return .head(ProxyResponse(status: head.status, headers: head.headers), expectedLength: nil)
                    }
                }
                if framing.hasTransferEncoding {
                    if framing.chunkedIsLast {
                        state = .chunked(head, ChunkedDecoder(), ByteBuffer())
                    } else {
                        var head = head
                        head.keepAlive = false
                        state = .untilClose(head, ByteBuffer())
                    }
                } else if let length = framing.contentLength {
                    guard length <= maxBodySize else { throw tooLarge }
                    if length == 0 { return .response(finish(head, ByteBuffer())) }
                    if input.readableBytes >= length {
                        // The whole body came with the head (the usual small answer): taken at
                        // once, the head never stored in a state to be copied out again.
                        return .response(finish(head, input.readSlice(length: length)!))
                    }
                    state = .body(head, remaining: length, ByteBuffer())
                } else {
                    var head = head
                    head.keepAlive = false
                    state = .untilClose(head, ByteBuffer())
                }
            case .body(let head, let remaining, var body):
                guard input.readableBytes > 0 else { return nil }
                state = .head  // drop the reference so that appending does not copy
                let left = HTTP1Syntax.take(remaining, from: &input, into: &body)
                if left == 0 { return .response(finish(head, body)) }
                state = .body(head, remaining: left, body)
                return nil
            case .chunked(let head, var decoder, var body):
                state = .head
                switch try decoder.decode(&input, into: &body, limit: maxBodySize, trailerLimit: maxHeadSize) {
                case .needMore:
                    state = .chunked(head, decoder, body)
                    return nil
                case .complete:
                    return .response(finish(head, body))
                case .tooLarge:
                    throw tooLarge
                }
            case .untilClose(let head, var body):
                state = .head
                if input.readableBytes > 0 {
                    guard body.readableBytes + input.readableBytes <= maxBodySize else { throw tooLarge }
                    if body.readableBytes == 0 { body = input } else { body.writeBuffer(&input) }
                    input = ByteBuffer()
                }
                state = .untilClose(head, body)
                return nil
            case .streamLength(let keepAlive, let remaining):
                if remaining == 0 {
                    state = .head
                    if input.readableBytes == 0 { input = ByteBuffer() }
                    return .end(keepAlive: keepAlive)
                }
                guard input.readableBytes > 0 else { return nil }
                let count = min(remaining, input.readableBytes)
                let part = input.readSlice(length: count)!
                state = .streamLength(keepAlive: keepAlive, remaining: remaining - count)
                return .part(part)
            case .streamChunked(let keepAlive, var decoder):
                if case .done = decoder.state {
                    state = .head
                    if input.readableBytes == 0 { input = ByteBuffer() }
                    return .end(keepAlive: keepAlive)
                }
                var part = ByteBuffer()
                let result = try decoder.decode(&input, into: &part, limit: .max, trailerLimit: maxHeadSize)
                state = .streamChunked(keepAlive: keepAlive, decoder)
                if part.readableBytes > 0 { return .part(part) }
                if case .needMore = result { return nil }
            case .streamUntilClose:
                guard input.readableBytes > 0 else { return nil }
                let part = input
                input = ByteBuffer()
                return .part(part)
            }
        }
    }

    /// The connection closed while a streamed body arrived: its end if it ran until the close,
    /// else an error (the body was cut short).
    public mutating func endOfStream() throws(HTTP1ParseError) -> Event {
        // Every byte read was handed out as a part already (nextEvent takes them all).
        if case .streamUntilClose = state {
            state = .head
            return .end(keepAlive: false)
        }
        throw HTTP1ParseError("The upstream closed the connection mid-response.")
    }

    /// The connection closed: the response whose body ran until the close, if that is what
    /// was arriving; an error if a response was cut short; nil if nothing was.
    public mutating func endOfInput() throws(HTTP1ParseError) -> Response? {
        switch state {
        case .untilClose(let head, let body):
            return finish(head, body)
        case .head where input.readableBytes == 0:
            return nil
        case .streamUntilClose:
            preconditionFailure("a streamed body ends with endOfStream")
        default:
            throw HTTP1ParseError("The upstream closed the connection mid-response.")
        }
    }

    private var tooLarge: HTTP1ParseError {
        HTTP1ParseError("The upstream response is larger than \(maxBodySize) bytes.", kind: .bodyTooLarge)
    }

    /// Takes `head` and `body` (a copy would retain and release each of their parts).
    private mutating func finish(_ head: consuming Head, _ body: consuming ByteBuffer) -> Response {
        state = .head
        if input.readableBytes == 0 { input = ByteBuffer() }
        // Built in the value returned: a response made apart and then passed in was copied.
        var finished = Response(response: ProxyResponse(status: head.status, headers: head.headers, body: body), keepAlive: head.keepAlive)
        finished.response.reservation = reservation.take()
        return finished
    }

    private mutating func readHead(requestMethod: HTTPRequest.Method) throws(HTTP1ParseError) -> (Head, BodyFraming, Int)? {
        let start = scanned
        let maxHeadSize = maxHeadSize
        // A HEAD answer's Content-Length says how long the GET answer would be: kept for the client.
        let keepLength = requestMethod == .head
        // The head's end once found (0 until then): the head is returned as it was made, not
        // taken apart and copied.
        var end = 0
        let parsed: (Head, BodyFraming, Int)? = try HTTP1Syntax.withBytes(input) { bytes throws(HTTP1ParseError) in
            guard let headEnd = HTTP1Syntax.headEnd(bytes, from: start) else { return nil }
            guard headEnd <= maxHeadSize else { throw HTTP1ParseError("The upstream's headers are larger than \(maxHeadSize) bytes.") }
            end = headEnd
            return try Self.parseHead(bytes, end: headEnd, keepLength: keepLength)
        }
        guard end > 0 else {
            guard input.readableBytes <= maxHeadSize else { throw HTTP1ParseError("The upstream's headers are larger than \(maxHeadSize) bytes.") }
            scanned = max(0, input.readableBytes - 3)
            return nil
        }
        input.moveReaderIndex(forwardBy: end)
        scanned = 0
        return parsed
    }

    static let maxFields = 500

    private static func parseHead(_ bytes: UnsafeRawBufferPointer, end: Int, keepLength: Bool) throws(HTTP1ParseError) -> (Head, BodyFraming, Int) {
        guard let lineEnd = try HTTP1Syntax.lineEnd(bytes, from: 0, to: end) else { throw HTTP1ParseError("The status line is not terminated.") }
        // HTTP/1.x SP 3DIGIT [SP reason]
        guard lineEnd >= 12, HTTP1Syntax.equals(UnsafeRawBufferPointer(rebasing: bytes[0..<7]), "HTTP/1."),
              bytes[7] == UInt8(ascii: "0") || bytes[7] == UInt8(ascii: "1"), bytes[8] == HTTP1Syntax.space else {
            throw HTTP1ParseError("The status line is not HTTP/1.x.")
        }
        let minorVersion = Int(bytes[7] - UInt8(ascii: "0"))
        var code = 0
        for index in 9..<12 {
            let digit = bytes[index]
            guard digit >= UInt8(ascii: "0"), digit <= UInt8(ascii: "9") else { throw HTTP1ParseError("The status code is not valid.") }
            code = code * 10 + Int(digit - UInt8(ascii: "0"))
        }
        guard code >= 100 else { throw HTTP1ParseError("The status code is not valid.") }
        var reason = ""
        // `200 OK`, most answers: the status as it stands, not one made and checked anew.
        var usual = false
        if lineEnd > 12 {
            guard bytes[12] == HTTP1Syntax.space else { throw HTTP1ParseError("The status line is not valid.") }
            let phrase = UnsafeRawBufferPointer(rebasing: bytes[13..<lineEnd])
            usual = code == 200 && HTTP1Syntax.equals(phrase, "OK")
            if !usual { reason = String(decoding: phrase, as: UTF8.self) }
        }
        let fieldsStart = lineEnd + 2
        var framing = HTTP1Framing()
        var lines = RawLines()
        lines.bytes.reserveCapacity(end - lineEnd)
        let headers: ProxyHeaders
        // Usually the kept lines alone, copied as they came: no HTTPField is made unless a
        // decorator asks for the headers. A HEAD answer's Content-Length is kept as a field,
        // and lines that would print differently as fields are read as fields.
        if !keepLength, try HTTP1Syntax.readFieldLines(bytes, from: fieldsStart, to: end - 2, maxFields: maxFields, framing: &framing, lines: &lines),
           framing.connectionNames.isEmpty {
            headers = ProxyHeaders(lines: SerializedFields.lines(lines))
        } else {
            var read = HTTPFields()
            framing = HTTP1Framing()
            lines = RawLines()
            try HTTP1Syntax.readFields(bytes, from: fieldsStart, to: end - 2, maxFields: maxFields, keepFraming: false, keepContentLength: keepLength,
                                       into: &read, framing: &framing, lines: &lines)
            if !framing.connectionNames.isEmpty {
                let named = framing.connectionNames
                var kept = HTTPFields()
                for field in read where !named.contains(field.name.canonicalName) { kept.append(field) }
                read = kept
                headers = ProxyHeaders(read)
            } else if lines.usable, lines.count == read.count {
                headers = ProxyHeaders(fields: read, lines: SerializedFields.lines(lines))
            } else {
                headers = ProxyHeaders(read)
            }
        }
        let keepAlive = minorVersion >= 1 ? !framing.connectionClose : framing.connectionKeepAlive && !framing.connectionClose
        let status = usual ? HTTPResponse.Status.ok : HTTPResponse.Status(code: code, reasonPhrase: reason)
        return (Head(status: status, headers: headers, keepAlive: keepAlive), BodyFraming(framing), code)
    }
}
