import HTTPTypes
import NIOCore
import VeneerCore

/// Reads HTTP/1.1 requests off a connection, one after another (pipelined requests wait in
/// the input), straight into the HTTP types the chain uses.
///
/// Framing follows RFC 9112 §6 and refuses what request smuggling relies on: a
/// `Transfer-Encoding` together with `Content-Length`, a `Transfer-Encoding` in HTTP/1.0 or
/// without `chunked` last, conflicting lengths, a missing or repeated `Host` in HTTP/1.1.
/// A field value must be UTF-8 (ASCII, or obs-text that forms UTF-8): it is then kept byte for
/// byte; other bytes would have to be altered to become a `String`, so the request is refused.
/// A body over ``bodyLimit`` (declared or actual) stops the parser: nothing after it can be
/// read, and the connection should close after the answer.
public struct HTTP1RequestParser {
    /// A request's head.
    public struct Head: Sendable {
        /// The method.
        public var method: HTTPRequest.Method
        /// The path and query: the origin form as sent, or what follows the authority of an
        /// absolute-form target.
        public var target: String
        /// 0 for HTTP/1.0, 1 for HTTP/1.1.
        public var minorVersion: Int
        /// The fields, without `Host`.
        public var fields: HTTPFields
        /// `Host`, or the authority of an absolute-form target.
        public var authority: String?
        /// Whether the connection may carry another request after this one.
        public var keepAlive: Bool
        /// Whether the client waits for `100 Continue` before it sends the body.
        public var expectsContinue: Bool
        /// Bytes of the head as read (request line, fields, the empty line).
        public var size = 0

        /// The head as an `HTTPRequest`.
        public var request: HTTPRequest {
            HTTPRequest(method: method, scheme: "http", authority: authority, path: target, headerFields: fields)
        }
    }

    /// What the next bytes made.
    public enum Event {
        /// The head of a request whose body is still to come, sent because it asked for
        /// `100 Continue`.
        case waitingForBody(Head)
        /// A whole request.
        case request(Head, ByteBuffer)
        /// A request with a body over the limit; the parser reads nothing more.
        case tooLarge(Head)
        /// A request whose declared body does not fit in the ``budget`` now; the parser reads
        /// nothing more.
        case overBudget(Head)
        /// The head of a request whose body streams (``streamsBody`` said so): its body comes
        /// as ``bodyPart(_:)`` events, each what the input held, then ``bodyEnd``. Its length
        /// when declared (`Content-Length`), nil when chunked. ``bodyLimit`` does not apply.
        case bodyStreams(Head, expectedLength: Int?)
        /// The next part of a streamed body (chunked framing removed).
        case bodyPart(ByteBuffer)
        /// The streamed body ended; what follows is the next request.
        case bodyEnd
    }

    private enum State {
        case head
        case body(Head, remaining: Int, ByteBuffer)
        case chunked(Head, ChunkedDecoder, ByteBuffer)
        /// A streamed body with a declared length: `remaining` bytes to come (0: its end is next).
        case streaming(Head, remaining: Int)
        /// A streamed chunked body.
        case streamingChunked(Head, ChunkedDecoder)
        case stopped
    }

    /// The largest header section (request line and fields).
    public let maxHeadSize: Int
    /// The most header fields.
    public let maxFields: Int
    /// The largest body.
    public var bodyLimit: Int
    /// What a body read whole is reserved from (nil: no budget): one declared by its
    /// `Content-Length` before it is read, a chunked one as its chunks arrive. A streamed body
    /// takes nothing from it.
    public var budget: BufferBudget?
    /// Asked at each head with a body: whether that body streams (``Event/bodyStreams(_:expectedLength:)``)
    /// rather than being read whole. Nil: every body is read whole.
    public var streamsBody: ((Head) -> Bool)?
    /// The reservation of the last request read whole, until ``takeReservation()``.
    private var reservation: BufferBudget.Reservation?
    private var input = ByteBuffer()
    private var scanned = 0
    private var state = State.head

    /// Creates a parser.
    public init(maxHeadSize: Int, maxFields: Int = 200, bodyLimit: Int) {
        self.maxHeadSize = maxHeadSize
        self.maxFields = maxFields
        self.bodyLimit = bodyLimit
    }

    /// Adds bytes read from the connection.
    public mutating func append(_ chunk: ByteBuffer) {
        if case .stopped = state { return }
        if input.readableBytes == 0 {
            input = chunk
        } else {
            var chunk = chunk
            input.writeBuffer(&chunk)
        }
    }

    /// How far the request being read has come.
    public enum Progress: Sendable, Equatable {
        /// Nothing of it has arrived (or the parser is stopped).
        case none
        /// Part of its head.
        case head
        /// Its head, and maybe part of its body.
        case body
    }

    /// How far the request being read has come.
    public var progress: Progress {
        switch state {
        case .head: return input.readableBytes > 0 ? .head : .none
        case .body, .chunked, .streaming, .streamingChunked: return .body
        case .stopped: return .none
        }
    }

    /// The request whose body was being read when the parser stopped (by ``stop()``, or an
    /// error in the body): its head, and how many bytes of its body had been read. What a
    /// refusal of that request (a body too slow, 408; a bad chunk, 400) knows of it; nil when
    /// the parser stopped before a whole head, or has not stopped.
    public private(set) var interrupted: (head: Head, bodyBytes: Int)?

    /// Whether the parser is between requests (nothing of the next one has arrived).
    public var isBetweenRequests: Bool { progress == .none }

    /// Whether a streamed body has had its last part: ``next()`` gives ``Event/bodyEnd``
    /// without more input.
    public var atStreamedBodyEnd: Bool {
        if case .streaming(_, remaining: 0) = state { return true }
        return false
    }

    /// The budget reservation of the request just read whole (nil without a budget or a
    /// declared body): whoever holds the request holds it, and its bytes go back with it.
    public mutating func takeReservation() -> BufferBudget.Reservation? {
        defer { reservation = nil }
        return reservation
    }

    /// Stops the parser: it drops what it holds and every byte appended later.
    public mutating func stop() {
        reservation = nil
        noteInterrupted()
        state = .stopped
        input = ByteBuffer()
    }

    private mutating func noteInterrupted() {
        switch state {
        case .body(let head, _, let body), .chunked(let head, _, let body): interrupted = (head, body.readableBytes)
        case .streaming(let head, _), .streamingChunked(let head, _): interrupted = (head, 0)
        case .head, .stopped: break
        }
    }

    /// The next event, or nil until more bytes arrive. After an error the parser is stopped.
    public mutating func next() throws(HTTP1ParseError) -> Event? {
        do {
            return try step()
        } catch {
            state = .stopped
            input = ByteBuffer()
            throw error
        }
    }

    private mutating func step() throws(HTTP1ParseError) -> Event? {
        switch state {
        case .stopped:
            return nil
        case .head:
            // Nothing more has come (asked again after each request): nothing to scan.
            guard input.readableBytes > 0 else {
                scanned = 0
                return nil
            }
            // Handed on, not copied: the head moves into the event or the state for its body.
            guard let (head, framing) = try readHead() else { return nil }
            return try begin(head, framing)
        case .body(let head, let remaining, var body):
            state = .stopped  // drop the reference so that appending does not copy
            guard input.readableBytes > 0 else {
                state = .body(head, remaining: remaining, body)
                return nil
            }
            let left = HTTP1Syntax.take(remaining, from: &input, into: &body)
            if left == 0 {
                return complete(head, body)
            }
            state = .body(head, remaining: left, body)
            return nil
        case .chunked(let head, var decoder, var body):
            state = .stopped
            let decoded: ChunkedResult
            let before = body.readableBytes
            do {
                decoded = try decoder.decode(&input, into: &body, limit: bodyLimit, trailerLimit: maxHeadSize)
            } catch {
                interrupted = (head, body.readableBytes)
                throw error
            }
            // A chunked body read whole takes its share of the budget as it arrives.
            if let reservation, !reservation.grow(by: body.readableBytes - before) {
                self.reservation = nil
                input = ByteBuffer()
                return .overBudget(head)
            }
            switch decoded {
            case .needMore:
                state = .chunked(head, decoder, body)
                return nil
            case .complete:
                return complete(head, body)
            case .tooLarge:
                input = ByteBuffer()
                return .tooLarge(head)
            }
        case .streaming(let head, let remaining):
            if remaining == 0 {
                return completeStream()
            }
            guard input.readableBytes > 0 else { return nil }
            let count = min(remaining, input.readableBytes)
            let part = input.readSlice(length: count)!
            state = .streaming(head, remaining: remaining - count)
            return .bodyPart(part)
        case .streamingChunked(let head, var decoder):
            state = .stopped
            var part = ByteBuffer()
            let decoded: ChunkedResult
            do {
                decoded = try decoder.decode(&input, into: &part, limit: .max, trailerLimit: maxHeadSize)
            } catch {
                interrupted = (head, 0)
                throw error
            }
            switch decoded {
            case .complete:
                state = .streaming(head, remaining: 0)
            case .needMore, .tooLarge:
                state = .streamingChunked(head, decoder)
            }
            if part.readableBytes > 0 { return .bodyPart(part) }
            if case .streaming = state { return completeStream() }
            return nil
        }
    }

    private mutating func completeStream() -> Event {
        state = .head
        if input.readableBytes == 0 { input = ByteBuffer() }
        return .bodyEnd
    }

    private mutating func complete(_ head: consuming Head, _ body: consuming ByteBuffer) -> Event {
        state = .head
        // Let go of the connection's read buffer as soon as nothing in it is waiting.
        if input.readableBytes == 0 { input = ByteBuffer() }
        return .request(head, body)
    }

    /// What follows a head: the request itself, or the state for its body. A request refused
    /// for its framing is noted as ``interrupted`` with no body read (one refused for its body
    /// is noted where its body is read, with its bytes).
    private mutating func begin(_ head: consuming Head, _ framing: HTTP1Framing) throws(HTTP1ParseError) -> Event? {
        if framing.hasTransferEncoding {
            if let refusal = Self.transferEncodingRefusal(framing, minorVersion: head.minorVersion) {
                interrupted = (head, 0)
                throw refusal
            }
            if streamsBody?(head) == true {
                state = .streamingChunked(head, ChunkedDecoder())
                return .bodyStreams(head, expectedLength: nil)
            }
            reservation = budget?.reserve(0)
            state = .chunked(head, ChunkedDecoder(), ByteBuffer())
            if head.expectsContinue { return .waitingForBody(head) }
            return try step()
        }
        let length = framing.contentLength ?? 0
        if length > 0, streamsBody?(head) == true {
            state = .streaming(head, remaining: length)
            return .bodyStreams(head, expectedLength: length)
        }
        if length > bodyLimit {
            state = .stopped
            input = ByteBuffer()
            return .tooLarge(head)
        }
        if length == 0 {
            return complete(head, ByteBuffer())
        }
        if let budget {
            guard let reserved = budget.reserve(length) else {
                state = .stopped
                input = ByteBuffer()
                return .overBudget(head)
            }
            reservation = reserved
        }
        state = .body(head, remaining: length, ByteBuffer())
        if head.expectsContinue, input.readableBytes == 0 { return .waitingForBody(head) }
        return try step()
    }

    /// Why a request with `Transfer-Encoding` is refused, if it is.
    private static func transferEncodingRefusal(_ framing: HTTP1Framing, minorVersion: Int) -> HTTP1ParseError? {
        guard minorVersion >= 1 else { return HTTP1ParseError("Transfer-Encoding is not allowed in HTTP/1.0.") }
        guard framing.contentLength == nil else { return HTTP1ParseError("Transfer-Encoding and Content-Length together are not accepted.") }
        // Any other coding would reach the upstream still encoded, its Transfer-Encoding dropped.
        guard framing.chunkedIsLast, framing.transferCodings == 1, !framing.emptyTransferCoding else {
            return HTTP1ParseError("Only the chunked transfer coding is accepted.")
        }
        return nil
    }

    /// The head, once its last line has arrived.
    private mutating func readHead() throws(HTTP1ParseError) -> (Head, HTTP1Framing)? {
        // RFC 9112 §2.2: empty lines before a request line are ignored.
        while input.readableBytes >= 2, input.getInteger(at: input.readerIndex, as: UInt16.self) == 0x0D0A {
            input.moveReaderIndex(forwardBy: 2)
            scanned = 0
        }
        let start = scanned
        let maxHeadSize = maxHeadSize
        let maxFields = maxFields
        // The head's end once found (0 until then): the head is returned as it was made, not
        // taken apart and copied.
        var end = 0
        let parsed: (Head, HTTP1Framing)? = try HTTP1Syntax.withBytes(input) { bytes throws(HTTP1ParseError) in
            guard let headEnd = try HTTP1Syntax.checkedHeadEnd(bytes, from: start) else { return nil }
            guard headEnd <= maxHeadSize else { throw HTTP1ParseError("The request headers are larger than the limit.", kind: .headTooLarge) }
            var (head, framing) = try Self.parseHead(bytes, end: headEnd, maxFields: maxFields)
            head.size = headEnd
            end = headEnd
            return (head, framing)
        }
        guard end > 0 else {
            guard input.readableBytes <= maxHeadSize else { throw HTTP1ParseError("The request headers are larger than the limit.", kind: .headTooLarge) }
            scanned = max(0, input.readableBytes - 3)
            return nil
        }
        input.moveReaderIndex(forwardBy: end)
        scanned = 0
        return parsed
    }

    static func parseHead(_ bytes: UnsafeRawBufferPointer, end: Int, maxFields: Int) throws(HTTP1ParseError) -> (Head, HTTP1Framing) {
        guard let lineEnd = try HTTP1Syntax.lineEnd(bytes, from: 0, to: end) else { throw HTTP1ParseError("The request line is not terminated.") }
        var index = 0
        while index < lineEnd, bytes[index] != HTTP1Syntax.space { index += 1 }
        let methodEnd = index
        guard methodEnd > 0, index < lineEnd else { throw HTTP1ParseError("The request line is not valid.") }
        index += 1
        let targetStart = index
        while index < lineEnd, bytes[index] != HTTP1Syntax.space { index += 1 }
        let targetEnd = index
        guard targetEnd > targetStart, index < lineEnd else { throw HTTP1ParseError("The request line is not valid.") }
        let targetBytes = UnsafeRawBufferPointer(rebasing: bytes[targetStart..<targetEnd])
        guard HTTP1Syntax.isVisibleASCII(targetBytes) else { throw HTTP1ParseError("The request target has characters that are not allowed.") }
        let versionBytes = UnsafeRawBufferPointer(rebasing: bytes[(index + 1)..<lineEnd])
        let minorVersion: Int
        if HTTP1Syntax.equals(versionBytes, "HTTP/1.1") {
            minorVersion = 1
        } else if HTTP1Syntax.equals(versionBytes, "HTTP/1.0") {
            minorVersion = 0
        } else {
            throw HTTP1ParseError("Only HTTP/1.0 and HTTP/1.1 are served here.")
        }
        let method = try Self.method(UnsafeRawBufferPointer(rebasing: bytes[0..<methodEnd]))

        var fields = HTTPFields()
        // Room for as many fields as the head has lines, when that is more than the one Host
        // line (which goes to the authority): a head of a Host alone makes no list at all, and
        // then the request id appended later is the only field (reserving 16 made a list of
        // 16 fields for every request, then copied it to append that id).
        var lines = 0
        for index in (lineEnd + 2)..<max(lineEnd + 2, end - 2) where bytes[index] == UInt8(ascii: "\n") { lines += 1 }
        if lines > 1 { fields.reserveCapacity(min(lines, maxFields)) }
        var framing = HTTP1Framing()
        // Host goes to the authority, as HTTPRequest keeps it.
        try HTTP1Syntax.readFields(bytes, from: lineEnd + 2, to: end - 2, maxFields: maxFields, keepFraming: true, dropHost: true, exactValues: true,
                                   into: &fields, framing: &framing)
        guard framing.hostCount <= 1 else { throw HTTP1ParseError("The request has more than one Host field.") }
        guard framing.hostCount == 1 || minorVersion == 0 else { throw HTTP1ParseError("An HTTP/1.1 request needs a Host field.") }

        var target = String(decoding: targetBytes, as: UTF8.self)
        var authority = framing.host
        if targetBytes.first != UInt8(ascii: "/") {
            if let absolute = Self.absoluteForm(target) {
                (authority, target) = absolute
            } else if target != "*", method != .connect || !targetBytes.allSatisfy(Self.isAuthorityByte) {
                // RFC 9112 §3.2: no other form exists; a relative path would reach the upstream as one.
                throw HTTP1ParseError("The request target is not a path, an absolute URI, * or (for CONNECT) host:port.")
            }
        }
        let keepAlive = minorVersion >= 1 ? !framing.connectionClose : framing.connectionKeepAlive && !framing.connectionClose
        let head = Head(method: method, target: target, minorVersion: minorVersion, fields: fields, authority: authority,
                        keepAlive: keepAlive, expectsContinue: framing.expectsContinue && minorVersion >= 1)
        return (head, framing)
    }

    static func method(_ bytes: UnsafeRawBufferPointer) throws(HTTP1ParseError) -> HTTPRequest.Method {
        switch bytes.count {
        case 3:
            if HTTP1Syntax.equals(bytes, "GET") { return .get }
            if HTTP1Syntax.equals(bytes, "PUT") { return .put }
        case 4:
            if HTTP1Syntax.equals(bytes, "POST") { return .post }
            if HTTP1Syntax.equals(bytes, "HEAD") { return .head }
        case 5:
            if HTTP1Syntax.equals(bytes, "PATCH") { return .patch }
        case 6:
            if HTTP1Syntax.equals(bytes, "DELETE") { return .delete }
        default:
            break
        }
        guard let method = HTTPRequest.Method(String(decoding: bytes, as: UTF8.self)) else {
            throw HTTP1ParseError("The method is not a token.")
        }
        return method
    }

    /// `http://host/path?q` → (`host`, `/path?q`); nil when the target is not absolute-form,
    /// or has a fragment (an absolute-URI has none), userinfo or an empty host (RFC 9110 §4.2).
    static func absoluteForm(_ target: String) -> (authority: String, path: String)? {
        guard let colon = target.firstIndex(of: ":"), target[colon...].hasPrefix("://"),
              ["http", "https"].contains(target[..<colon].lowercased()), !target.contains("#") else { return nil }
        let rest = target[target.index(colon, offsetBy: 3)...]
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        guard !authority.isEmpty, authority.utf8.allSatisfy(isAuthorityByte) else { return nil }
        let path = rest[authorityEnd...]
        return (String(authority), path.hasPrefix("/") ? String(path) : "/" + path)
    }

    /// A byte of a host and port (RFC 3986 §3.2.2: unreserved, pct-encoded, sub-delims, an IP literal's brackets).
    static func isAuthorityByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "%"), UInt8(ascii: "!"),
             UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "*"),
             UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="), UInt8(ascii: ":"), UInt8(ascii: "["),
             UInt8(ascii: "]"):
            return true
        default:
            return false
        }
    }
}
