#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HTTPTypes
import NIOCore
import VeneerCore

/// Why an HTTP/1.1 message could not be read. The message says what was wrong in words a
/// caller can act on; the connection it came on cannot be used any further.
public struct HTTP1ParseError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What kind of problem it is.
    public enum Kind: Sendable {
        /// The bytes are not a valid message.
        case malformed
        /// The header section is over the limit.
        case headTooLarge
        /// The body is over the limit.
        case bodyTooLarge
    }

    /// What was wrong.
    public let reason: String
    /// What kind of problem it is.
    public let kind: Kind

    init(_ reason: String, kind: Kind = .malformed) {
        self.reason = reason
        self.kind = kind
    }

    public var description: String { reason }
}

/// The raw field lines a message kept, gathered while its fields are read, to become its
/// ``SerializedFields`` (when every kept line is what its `HTTPField` would print).
struct RawLines {
    /// The lines, copied as they came (an array: one allocation, where a buffer takes two).
    var bytes: [UInt8] = []
    var count = 0
    var hasDate = false
    var declaredLength: String?
    var usable = true
    /// ``FieldLines/nameBits`` of the lines.
    var nameBits: UInt64 = 0

    /// Adds a line whose name is its first `nameLength` bytes.
    mutating func add(_ line: UnsafeRawBufferPointer, nameLength: Int, isDate: Bool, isLength: String?) {
        if isLength != nil {
            // Content-Length is never copied onto the wire as it came.
            declaredLength = isLength
        } else {
            line.withMemoryRebound(to: UInt8.self) { bytes.append(contentsOf: $0) }
            nameBits |= SerializedFields.nameMask(UnsafeRawBufferPointer(rebasing: line[0..<nameLength]))
        }
        count += 1
        if isDate { hasDate = true }
    }

    /// Copies whole kept lines (counted by the caller).
    @inline(__always)
    mutating func append(_ run: UnsafeRawBufferPointer) {
        guard !run.isEmpty else { return }
        run.withMemoryRebound(to: UInt8.self) { bytes.append(contentsOf: $0) }
    }
}

/// What the framing fields of a message say, gathered while its fields are read.
struct HTTP1Framing {
    var contentLength: Int?
    var hasTransferEncoding = false
    var chunkedIsLast = false
    /// How many transfer codings the `Transfer-Encoding` fields list in all.
    var transferCodings = 0
    /// Whether a `Transfer-Encoding` list had an empty element (`chunked,`): a request with
    /// one is refused, as NIO's parser and others refuse it (two parsers must never disagree
    /// on where a request body ends).
    var emptyTransferCoding = false
    var connectionClose = false
    var connectionKeepAlive = false
    var expectsContinue = false
    /// Other names that `Connection` lists (hop-by-hop for this message), lower-case.
    var connectionNames: [String] = []
    var host: String?
    var hostCount = 0
}

/// The pieces both parsers share: finding the end of a header section, reading its field
/// lines strictly (RFC 9112 §5), and decoding chunked bodies (§7.1).
///
/// Strict where laxness lets two parsers disagree about where a message ends: obsolete line
/// folding, whitespace before the colon, bare CR or LF, an invalid or repeated conflicting
/// `Content-Length` and a `Transfer-Encoding` that does not end in `chunked` are errors.
enum HTTP1Syntax {
    static let cr = UInt8(ascii: "\r")
    static let lf = UInt8(ascii: "\n")
    static let space = UInt8(ascii: " ")
    static let tab = UInt8(ascii: "\t")
    static let colon = UInt8(ascii: ":")

    /// The offset just past the `CRLF CRLF` that ends the header section, searching from
    /// `start` (where an earlier search left off); nil when it has not arrived yet.
    static func headEnd(_ bytes: UnsafeRawBufferPointer, from start: Int) -> Int? {
        guard let base = bytes.baseAddress else { return nil }
        var index = max(start, 3)
        let count = bytes.count
        while index < count {
            // Jump by LF (memchr reads many bytes at a time): the section ends at the LF of "\r\n\r\n".
            guard let found = memchr(base + index, Int32(lf), count - index) else { return nil }
            let at = base.distance(to: UnsafeRawPointer(found))
            if bytes[at - 1] == cr, bytes[at - 2] == lf, bytes[at - 3] == cr { return at + 1 }
            index = at + 1
        }
        return nil
    }

    /// ``headEnd(_:from:)`` for a request, refusing at once what can never become a valid
    /// head: a bare LF, a CR followed by anything but LF, a NUL or another control character
    /// but tab (RFC 9110 §5.5: invalid in a field value; HTTPField would turn it into a space,
    /// and a request is forwarded unaltered or not at all). So a client that ends its lines
    /// with LF alone gets its 400 now, not when it gives up waiting.
    static func checkedHeadEnd(_ bytes: UnsafeRawBufferPointer, from start: Int) throws(HTTP1ParseError) -> Int? {
        var index = start
        let count = bytes.count
        while index < count {
            let byte = bytes[index]
            // One comparison for the usual byte: every control character is below the space but DEL.
            if byte < space {
                if byte == lf {
                    guard index > 0, bytes[index - 1] == cr else { throw HTTP1ParseError("A line ends in a bare LF.") }
                    if index >= 3, bytes[index - 2] == lf, bytes[index - 3] == cr { return index + 1 }
                } else if byte == cr {
                    // A CR as the last byte so far is checked again when more arrive.
                    if index + 1 < count, bytes[index + 1] != lf { throw HTTP1ParseError("A line ends in a bare CR.") }
                } else if byte == 0 {
                    throw HTTP1ParseError("The request head contains NUL.")
                } else if byte != tab {
                    throw HTTP1ParseError("The request head contains a control character.")
                }
            } else if byte == 0x7F {
                throw HTTP1ParseError("The request head contains a control character.")
            }
            index += 1
        }
        return nil
    }

    /// Runs `body` on the readable bytes of `buffer`; what it returns is handed back as it is
    /// (a `Result` in between was copied out by `get()`, a parsed head with all its parts).
    static func withBytes<T>(_ buffer: ByteBuffer, _ body: (UnsafeRawBufferPointer) throws(HTTP1ParseError) -> T) throws(HTTP1ParseError) -> T {
        do {
            return try buffer.withUnsafeReadableBytes { bytes in try body(bytes) }
        } catch let error as HTTP1ParseError {
            throw error
        } catch {
            preconditionFailure("only an HTTP1ParseError is thrown here")
        }
    }

    /// The end of the line starting at `start` (the index of its CR), requiring CRLF; nil when
    /// there is no CRLF before `end`. A bare LF or CR inside the line is an error.
    static func lineEnd(_ bytes: UnsafeRawBufferPointer, from start: Int, to end: Int) throws(HTTP1ParseError) -> Int? {
        var index = start
        while index < end {
            let byte = bytes[index]
            if byte == cr {
                guard index + 1 < end else { return nil }
                guard bytes[index + 1] == lf else { throw HTTP1ParseError("A line ends in a bare CR.") }
                return index
            }
            if byte == lf { throw HTTP1ParseError("A line ends in a bare LF.") }
            index += 1
        }
        return nil
    }

    /// Where one field line's parts are (offsets into the header section).
    struct FieldLine {
        var name: Range<Int>
        var value: Range<Int>
        /// The index of the line's CR.
        var lineEnd: Int
        /// No control character but tab in the value: the raw line prints as its `HTTPField` would.
        var clean: Bool
        /// Every byte of the value is ASCII (no obs-text).
        var ascii: Bool
    }

    /// The field line starting at `lineStart`, checked strictly: CRLF, no obsolete folding, a
    /// colon after a non-empty name, no NUL in the value; optional whitespace trimmed.
    @inline(__always)
    static func fieldLine(_ bytes: UnsafeRawBufferPointer, from lineStart: Int, to end: Int) throws(HTTP1ParseError) -> FieldLine {
        guard let lineEnd = try lineEnd(bytes, from: lineStart, to: end) else {
            throw HTTP1ParseError("A header line is not terminated.")
        }
        let first = bytes[lineStart]
        guard first != space, first != tab else { throw HTTP1ParseError("Obsolete line folding is not accepted.") }
        var colonIndex = lineStart
        while colonIndex < lineEnd, bytes[colonIndex] != colon { colonIndex += 1 }
        guard colonIndex < lineEnd, colonIndex > lineStart else { throw HTTP1ParseError("A header line has no field name.") }
        var valueStart = colonIndex + 1
        var valueEnd = lineEnd
        while valueStart < valueEnd, bytes[valueStart] == space || bytes[valueStart] == tab { valueStart += 1 }
        while valueEnd > valueStart, bytes[valueEnd - 1] == space || bytes[valueEnd - 1] == tab { valueEnd -= 1 }
        var clean = true
        var seen: UInt8 = 0
        for index in valueStart..<valueEnd {
            let byte = bytes[index]
            seen |= byte
            if byte < 0x20 || byte == 0x7F {
                if byte == 0 { throw HTTP1ParseError("A field value contains NUL.") }
                // A control character: HTTPField turns it into a space, the raw line would not.
                if byte != tab { clean = false }
            }
        }
        return FieldLine(name: lineStart..<colonIndex, value: valueStart..<valueEnd, lineEnd: lineEnd, clean: clean, ascii: seen < 0x80)
    }

    static let notAToken = HTTP1ParseError("A field name is not a token (no spaces before the colon).")

    /// Reads the field lines in `start..<end` (each ending in CRLF, the empty line excluded).
    /// `keepFraming` says whether hop-by-hop and framing fields stay in `fields`;
    /// `exactValues` refuses a value that is not UTF-8 (see ``HTTP1RequestParser``).
    static func readFields(
        _ bytes: UnsafeRawBufferPointer, from start: Int, to end: Int, maxFields: Int, keepFraming: Bool, dropHost: Bool = false,
        exactValues: Bool = false,
        keepContentLength: Bool = false, into fields: inout HTTPFields, framing: inout HTTP1Framing, lines: UnsafeMutablePointer<RawLines>? = nil
    ) throws(HTTP1ParseError) {
        try forEachFieldLine(bytes, from: start, to: end, maxFields: maxFields) { line, whole throws(HTTP1ParseError) in
            guard let name = fieldName(UnsafeRawBufferPointer(rebasing: bytes[line.name])) else { throw notAToken }
            let valueBytes = UnsafeRawBufferPointer(rebasing: bytes[line.value])
            let value = String(decoding: valueBytes, as: UTF8.self)
            // Decoding would turn bytes that are not UTF-8 into U+FFFD: the value would change
            // on its way on, and two different values would become one (in a cache key, a rule).
            if exactValues, !line.ascii, !value.utf8.elementsEqual(valueBytes) {
                throw HTTP1ParseError("A header value has bytes that are not UTF-8.")
            }
            let keep = try note(name, valueBytes, framing: &framing)
                || (keepContentLength && name == .contentLength)
            if (keep || keepFraming), !(dropHost && name == .hostField) {
                fields.append(HTTPField(name: name, value: value))
                if let lines {
                    if !line.clean { lines.pointee.usable = false }
                    lines.pointee.add(whole, nameLength: line.name.count, isDate: name == .date,
                                      isLength: name == .contentLength ? value : nil)
                }
            }
            return true
        }
    }

    /// Calls `body` with each field line in `start..<end` (and its bytes, CRLF included) until
    /// it returns false; at most `maxFields` lines.
    @inline(__always)
    static func forEachFieldLine(
        _ bytes: UnsafeRawBufferPointer, from start: Int, to end: Int, maxFields: Int,
        _ body: (FieldLine, UnsafeRawBufferPointer) throws(HTTP1ParseError) -> Bool
    ) throws(HTTP1ParseError) {
        var lineStart = start
        var count = 0
        while lineStart < end {
            let line = try fieldLine(bytes, from: lineStart, to: end)
            count += 1
            guard count <= maxFields else {
                throw HTTP1ParseError("The message has more than \(maxFields) header fields.", kind: .headTooLarge)
            }
            guard try body(line, UnsafeRawBufferPointer(rebasing: bytes[lineStart..<(line.lineEnd + 2)])) else { return }
            lineStart = line.lineEnd + 2
        }
    }

    /// Reads a response's field lines without making an `HTTPField` of each: the framing
    /// fields are noted, hop-by-hop ones dropped, and every other line copied to `lines` as it
    /// came (for ``SerializedFields``, which makes the fields when they are asked for).
    /// Returns false, with `lines` unusable, when a kept line would not print as its
    /// `HTTPField` would (a control character in the value): read them with ``readFields``.
    /// `framing` and `lines` come fresh (nothing noted, no line kept).
    static func readFieldLines(
        _ bytes: UnsafeRawBufferPointer, from start: Int, to end: Int, maxFields: Int, framing: inout HTTP1Framing, lines: inout RawLines
    ) throws(HTTP1ParseError) -> Bool {
        if try scanPlainFieldLines(bytes, from: start, to: end, maxFields: maxFields, framing: &framing, lines: &lines) { return true }
        // Not plain: the careful reader reads them all again, from nothing noted and no line kept.
        let capacity = lines.bytes.capacity
        framing = HTTP1Framing()
        lines = RawLines()
        lines.bytes.reserveCapacity(capacity)
        var usable = true
        try forEachFieldLine(bytes, from: start, to: end, maxFields: maxFields) { line, whole throws(HTTP1ParseError) in
            let nameBytes = UnsafeRawBufferPointer(rebasing: bytes[line.name])
            guard isToken(nameBytes) else { throw notAToken }
            if let framingName = responseFramingName(nameBytes) {
                // Never kept: Veneer frames the answer itself.
                _ = try note(framingName, UnsafeRawBufferPointer(rebasing: bytes[line.value]), framing: &framing)
            } else if !HopByHop.isRemoved(nameBytes) {
                guard line.clean else {
                    usable = false
                    return false
                }
                lines.add(whole, nameLength: line.name.count, isDate: nameBytes.count == 4 && equalsIgnoringCase(nameBytes, "date"), isLength: nil)
            }
            return true
        }
        lines.usable = usable
        return usable
    }

    /// ``readFieldLines(_:from:to:maxFields:framing:lines:)`` for the usual header section, one
    /// pass over each line's bytes and the kept lines copied in runs: false as soon as a line is
    /// not plain (a name that is not a token or has no colon, a control character but tab, a
    /// bare CR or LF, more than `maxFields` lines), and the caller reads them all again with
    /// the careful reader, so that what is accepted or refused, and why, is always its say.
    /// A plain line is one that reader takes as it is (same name, value, and a clean line), so
    /// the framing noted and the errors `note` throws are the same either way.
    @inline(__always)
    private static func scanPlainFieldLines(
        _ bytes: UnsafeRawBufferPointer, from start: Int, to end: Int, maxFields: Int, framing: inout HTTP1Framing, lines: inout RawLines
    ) throws(HTTP1ParseError) -> Bool {
        var lineStart = start
        // The first kept line not yet copied to `lines`.
        var run = start
        var count = 0
        while lineStart < end {
            count += 1
            guard count <= maxFields else { return false }
            var index = lineStart
            while index < end, isTokenByteByTable(bytes[index]) { index += 1 }
            guard index > lineStart, index < end, bytes[index] == colon else { return false }
            let name = UnsafeRawBufferPointer(rebasing: bytes[lineStart..<index])
            index += 1
            while index < end, bytes[index] == space || bytes[index] == tab { index += 1 }
            let valueStart = index
            // Visible bytes, obs-text, spaces and tabs up to the CR (DEL and other controls are not
            // plain): eight at a time while none is below the space or DEL, then one at a time.
            while index + 8 <= end, !hasControl(bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self)) { index += 8 }
            while index < end {
                let byte = bytes[index]
                guard byte >= space ? byte != 0x7F : byte == tab else { break }
                index += 1
            }
            guard index + 1 < end, bytes[index] == cr, bytes[index + 1] == lf else { return false }
            var valueEnd = index
            while valueEnd > valueStart, bytes[valueEnd - 1] == space || bytes[valueEnd - 1] == tab { valueEnd -= 1 }
            let next = index + 2
            let framingName = responseFramingName(name)
            if let framingName {
                // Never kept: Veneer frames the answer itself.
                _ = try note(framingName, UnsafeRawBufferPointer(rebasing: bytes[valueStart..<valueEnd]), framing: &framing)
            }
            if framingName != nil || HopByHop.isRemoved(name) {
                lines.append(UnsafeRawBufferPointer(rebasing: bytes[run..<lineStart]))
                run = next
            } else {
                lines.count += 1
                lines.nameBits |= SerializedFields.nameMask(name)
                if name.count == 4, equalsIgnoringCase(name, "date") { lines.hasDate = true }
            }
            lineStart = next
        }
        lines.append(UnsafeRawBufferPointer(rebasing: bytes[run..<end]))
        lines.usable = true
        return true
    }

    /// The framing field a response's field name is, in any case (`Connection`,
    /// `Content-Length`, `Transfer-Encoding`): noted, never kept.
    @inline(__always)
    static func responseFramingName(_ name: UnsafeRawBufferPointer) -> HTTPField.Name? {
        switch name.count {
        case 10 where equalsIgnoringCase(name, "connection"): .connection
        case 14 where equalsIgnoringCase(name, "content-length"): .contentLength
        case 17 where equalsIgnoringCase(name, "transfer-encoding"): .transferEncoding
        default: nil
        }
    }

    /// ``isTokenByte(_:)`` by a 128-bit table (a test checks that the two agree): the name of
    /// each field of each answer is checked byte by byte.
    @inline(__always)
    static func isTokenByteByTable(_ byte: UInt8) -> Bool {
        let word: UInt64 = byte < 64 ? 0x03FF_6CFA_0000_0000 : byte < 128 ? 0x57FF_FFFF_C7FF_FFFE : 0
        return (word >> UInt64(byte & 63)) & 1 != 0
    }

    /// Whether one of the eight bytes of `word` is below the space or is DEL (bit tricks that
    /// find any byte below a bound, and any zero byte of `word ^ DEL…`; never a false "no").
    @inline(__always)
    static func hasControl(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        let below = (word &- ones &* 0x20) & ~word & highs
        let del = word ^ (ones &* 0x7F)
        return (below | ((del &- ones) & ~del & highs)) != 0
    }

    /// Records what a framing field says (`value` is its bytes); false for fields that never
    /// pass a hop (so a response parser can drop them right away).
    static func note(_ name: HTTPField.Name, _ value: UnsafeRawBufferPointer, framing: inout HTTP1Framing) throws(HTTP1ParseError) -> Bool {
        let canonical = name.canonicalName
        switch canonical.utf8.count {
        case 4 where canonical == "host":
            framing.hostCount += 1
            if framing.host == nil { framing.host = String(decoding: value, as: UTF8.self) }
            return true
        case 6 where canonical == "expect":
            if equalsIgnoringCase(trimmed(value), "100-continue") { framing.expectsContinue = true }
            return true
        case 10 where canonical == "connection":
            // Usually one token, "keep-alive" or "close": compared without a lower-cased copy.
            forEachToken(value) { token in
                if equalsIgnoringCase(token, "keep-alive") {
                    framing.connectionKeepAlive = true
                } else if equalsIgnoringCase(token, "close") {
                    framing.connectionClose = true
                } else if !token.isEmpty {
                    framing.connectionNames.append(String(decoding: token, as: UTF8.self).lowercased())
                }
            }
            return false
        case 14 where canonical == "content-length":
            var problem: HTTP1ParseError?
            forEachToken(value) { digits in
                guard problem == nil else { return }
                var length = 0
                guard !digits.isEmpty, digits.count <= 18 else {
                    problem = HTTP1ParseError("Content-Length is not a number.")
                    return
                }
                for digit in digits {
                    guard digit >= UInt8(ascii: "0"), digit <= UInt8(ascii: "9") else {
                        problem = HTTP1ParseError("Content-Length is not a number.")
                        return
                    }
                    length = length * 10 + Int(digit - UInt8(ascii: "0"))
                }
                if let known = framing.contentLength, known != length {
                    problem = HTTP1ParseError("Content-Length is given twice with different values.")
                    return
                }
                framing.contentLength = length
            }
            if let problem { throw problem }
            return false
        case 17 where canonical == "transfer-encoding":
            framing.hasTransferEncoding = true
            // A later field can add codings after an earlier "chunked": only the very last counts.
            var last = UnsafeRawBufferPointer(start: nil, count: 0)
            forEachToken(value) { coding in
                if !coding.isEmpty {
                    last = coding
                    framing.transferCodings += 1
                } else {
                    framing.emptyTransferCoding = true
                }
            }
            framing.chunkedIsLast = equalsIgnoringCase(last, "chunked")
            return false
        default:
            return !HopByHop.isRemoved(canonical)
        }
    }

    /// The name for these bytes: one of the common ones without an allocation, else a
    /// validated new one; nil when the bytes are not a token.
    static func fieldName(_ bytes: UnsafeRawBufferPointer) -> HTTPField.Name? {
        switch bytes.count {
        case 4:
            if equals(bytes, "Host") || equals(bytes, "host") { return .hostField }
            if equals(bytes, "Date") { return .date }
            if equals(bytes, "ETag") { return .eTag }
        case 6:
            if equals(bytes, "Accept") || equals(bytes, "accept") { return .accept }
            if equals(bytes, "Server") { return .server }
            if equals(bytes, "Cookie") { return .cookie }
        case 10:
            if equals(bytes, "Connection") || equals(bytes, "connection") { return .connection }
            if equals(bytes, "User-Agent") || equals(bytes, "user-agent") { return .userAgent }
        case 12:
            if equals(bytes, "Content-Type") || equals(bytes, "content-type") { return .contentType }
            if equals(bytes, "X-Request-Id") { return .xRequestID }
        case 13:
            if equals(bytes, "Cache-Control") || equals(bytes, "cache-control") { return .cacheControl }
            if equals(bytes, "Last-Modified") { return .lastModified }
            if equals(bytes, "Authorization") || equals(bytes, "authorization") { return .authorization }
            if equals(bytes, "Accept-Ranges") { return .acceptRanges }
        case 14:
            if equals(bytes, "Content-Length") || equals(bytes, "content-length") { return .contentLength }
        case 15:
            if equals(bytes, "Accept-Encoding") || equals(bytes, "accept-encoding") { return .acceptEncoding }
        default:
            break
        }
        return HTTPField.Name(String(decoding: bytes, as: UTF8.self))
    }

    /// Calls `body` with each comma-separated item of a field value, trimmed (no array).
    static func forEachToken(_ value: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> Void) {
        var start = 0
        for index in 0...value.count where index == value.count || value[index] == UInt8(ascii: ",") {
            body(trimmed(UnsafeRawBufferPointer(rebasing: value[start..<index])))
            start = index + 1
        }
    }

    /// `bytes` without leading and trailing spaces and tabs.
    static func trimmed(_ bytes: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        var start = 0
        var end = bytes.count
        while start < end, bytes[start] == space || bytes[start] == tab { start += 1 }
        while end > start, bytes[end - 1] == space || bytes[end - 1] == tab { end -= 1 }
        return UnsafeRawBufferPointer(rebasing: bytes[start..<end])
    }

    @inline(__always)
    static func equals(_ bytes: UnsafeRawBufferPointer, _ text: StaticString) -> Bool {
        guard bytes.count == text.utf8CodeUnitCount else { return false }
        return text.withUTF8Buffer { expected in
            for index in 0..<expected.count where bytes[index] != expected[index] { return false }
            return true
        }
    }

    /// `byte` in lower case (ASCII letters only).
    @inline(__always)
    static func lowercased(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
    }

    /// Whether `bytes` are `lowercase` in any case (ASCII).
    @inline(__always)
    static func equalsIgnoringCase(_ bytes: UnsafeRawBufferPointer, _ lowercase: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count == lowercase.count else { return false }
        for index in 0..<bytes.count where lowercased(bytes[index]) != lowercase[index] { return false }
        return true
    }

    /// ``equalsIgnoringCase(_:_:)`` with a literal.
    @inline(__always)
    static func equalsIgnoringCase(_ bytes: UnsafeRawBufferPointer, _ lowercase: StaticString) -> Bool {
        lowercase.withUTF8Buffer { equalsIgnoringCase(bytes, UnsafeRawBufferPointer($0)) }
    }

    /// Whether `bytes` are a token (RFC 9110 §5.6.2), as `HTTPField.Name` requires of a name.
    static func isToken(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard !bytes.isEmpty else { return false }
        for byte in bytes where !isTokenByte(byte) { return false }
        return true
    }

    /// Whether `byte` is a tchar (RFC 9110 §5.6.2).
    @inline(__always)
    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
             UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
             UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    /// Moves up to `remaining` body bytes from `input` to `body` (without a copy when the
    /// body is still empty); returns how many are still to come.
    static func take(_ remaining: Int, from input: inout ByteBuffer, into body: inout ByteBuffer) -> Int {
        let count = min(remaining, input.readableBytes)
        var slice = input.readSlice(length: count)!
        if body.readableBytes == 0 { body = slice } else { body.writeBuffer(&slice) }
        return remaining - count
    }

    /// Whether every byte is visible ASCII (a request target, a method).
    static func isVisibleASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
        for byte in bytes where byte <= 0x20 || byte >= 0x7F { return false }
        return true
    }
}

/// Decodes a chunked body (RFC 9112 §7.1) as it arrives: chunk sizes in hex with optional
/// extensions (ignored), data, and a trailer section (read and dropped).
struct ChunkedDecoder {
    enum State {
        case size
        case data(remaining: Int)
        case dataEnd
        case trailers
        case done
    }

    var state = State.size
    static let maxLine = 4096

    /// Consumes what it can from `input`, appending chunk data to `body`; true when the body
    /// is complete. `limit` bounds the body: more is `tooLarge`.
    mutating func decode(_ input: inout ByteBuffer, into body: inout ByteBuffer, limit: Int, trailerLimit: Int) throws(HTTP1ParseError) -> ChunkedResult {
        while true {
            switch state {
            case .size:
                guard let line = try Self.line(&input) else {
                    try Self.checkPartialSize(input)
                    return .needMore
                }
                let digits = line.prefix { Self.hexValue($0) != nil }
                guard !digits.isEmpty, digits.count <= 15 else { throw HTTP1ParseError("A chunk size is not valid.") }
                // Extensions are dropped, but only well-formed ones are accepted, as NIO's parser (llhttp) does.
                guard Self.areExtensions(line[digits.endIndex...]) else { throw HTTP1ParseError("A chunk size is not valid.") }
                var size = 0
                for byte in digits { size = size * 16 + Self.hexValue(byte)! }
                if size == 0 {
                    state = .trailers
                } else {
                    guard body.readableBytes + size <= limit else { return .tooLarge }
                    state = .data(remaining: size)
                }
            case .data(let remaining):
                guard input.readableBytes > 0 else { return .needMore }
                let take = min(remaining, input.readableBytes)
                var slice = input.readSlice(length: take)!
                body.writeBuffer(&slice)
                state = remaining == take ? .dataEnd : .data(remaining: remaining - take)
            case .dataEnd:
                guard input.readableBytes >= 2 else {
                    if input.readableBytes == 1, input.getInteger(at: input.readerIndex, as: UInt8.self) != HTTP1Syntax.cr {
                        throw HTTP1ParseError("Chunk data is not followed by CRLF.")
                    }
                    return .needMore
                }
                guard input.readInteger(as: UInt16.self) == UInt16(HTTP1Syntax.cr) << 8 | UInt16(HTTP1Syntax.lf) else {
                    throw HTTP1ParseError("Chunk data is not followed by CRLF.")
                }
                state = .size
            case .trailers:
                guard let line = try Self.line(&input, limit: trailerLimit) else { return .needMore }
                if line.isEmpty {
                    state = .done
                    return .complete
                }
                try Self.checkTrailer(line)
            case .done:
                return .complete
            }
        }
    }

    /// One CRLF-terminated line (without the CRLF), consumed; nil when it has not all arrived.
    static func line(_ input: inout ByteBuffer, limit: Int = maxLine) throws(HTTP1ParseError) -> [UInt8]? {
        let found = try HTTP1Syntax.withBytes(input) { bytes throws(HTTP1ParseError) in
            try HTTP1Syntax.lineEnd(bytes, from: 0, to: bytes.count)
        }
        guard let end = found else {
            if input.readableBytes > limit { throw HTTP1ParseError("A chunk line is too long.") }
            return nil
        }
        guard end <= limit else { throw HTTP1ParseError("A chunk line is too long.") }
        let line = input.readBytes(length: end)!
        input.moveReaderIndex(forwardBy: 2)
        return line
    }

    /// Refuses a chunk-size line that has started wrong, before its end arrives: hex digits,
    /// then the end of the size (an extension or the CR).
    static func checkPartialSize(_ input: ByteBuffer) throws(HTTP1ParseError) {
        var digits = 0
        for byte in input.readableBytesView {
            if hexValue(byte) != nil {
                digits += 1
                guard digits <= 15 else { throw HTTP1ParseError("A chunk size is not valid.") }
                continue
            }
            guard digits > 0, byte == UInt8(ascii: ";") || byte == HTTP1Syntax.cr else {
                throw HTTP1ParseError("A chunk size is not valid.")
            }
            return
        }
    }

    /// Whether `bytes` (what follows a chunk size) are chunk extensions (RFC 9112 §7.1.1):
    /// `*( ";" name [ "=" ( token / quoted-string ) ] )`. Without the grammar's BWS, which
    /// senders must not generate: NIO's parser (llhttp) refuses it too, so the two read every
    /// chunk line alike.
    static func areExtensions(_ bytes: ArraySlice<UInt8>) -> Bool {
        var index = bytes.startIndex
        func token() -> Bool {
            let start = index
            while index < bytes.endIndex, HTTP1Syntax.isTokenByte(bytes[index]) { index += 1 }
            return index > start
        }
        func quotedString() -> Bool {
            index += 1
            while index < bytes.endIndex {
                let byte = bytes[index]
                index += 1
                if byte == UInt8(ascii: "\"") { return true }
                // qdtext and quoted-pair allow HTAB, SP, visible ASCII and obs-text: no other control.
                if byte == UInt8(ascii: "\\") {
                    guard index < bytes.endIndex else { return false }
                    let escaped = bytes[index]
                    index += 1
                    if escaped != HTTP1Syntax.tab, escaped < HTTP1Syntax.space || escaped == 0x7F { return false }
                } else if byte != HTTP1Syntax.tab, byte < HTTP1Syntax.space || byte == 0x7F {
                    return false
                }
            }
            return false
        }
        while index < bytes.endIndex {
            guard bytes[index] == UInt8(ascii: ";") else { return false }
            index += 1
            guard token() else { return false }
            guard index < bytes.endIndex, bytes[index] == UInt8(ascii: "=") else { continue }
            index += 1
            guard index < bytes.endIndex, bytes[index] == UInt8(ascii: "\"") ? quotedString() : token() else { return false }
        }
        return true
    }

    /// A trailer field is a field line like any other (RFC 9112 §7.1.2), even though it is dropped.
    static func checkTrailer(_ line: [UInt8]) throws(HTTP1ParseError) {
        guard let first = line.first, first != HTTP1Syntax.space, first != HTTP1Syntax.tab else {
            throw HTTP1ParseError("Obsolete line folding is not accepted.")
        }
        guard let colon = line.firstIndex(of: HTTP1Syntax.colon),
              line.withUnsafeBytes({ HTTP1Syntax.isToken(UnsafeRawBufferPointer(rebasing: $0[0..<colon])) }) else { throw HTTP1Syntax.notAToken }
        // NUL or another control character but tab, as in the head (RFC 9110 §5.5), and as NIO's parser refuses.
        guard !line.contains(where: { ($0 < HTTP1Syntax.space && $0 != HTTP1Syntax.tab) || $0 == 0x7F }) else {
            throw HTTP1ParseError("A trailer field contains a control character.")
        }
        // Framing after the body has no meaning (RFC 9110 §6.5.1), and NIO's parser refuses it there.
        let framing = line.withUnsafeBytes { bytes in
            let name = UnsafeRawBufferPointer(rebasing: bytes[0..<colon])
            return HTTP1Syntax.equalsIgnoringCase(name, "content-length") || HTTP1Syntax.equalsIgnoringCase(name, "transfer-encoding")
        }
        guard !framing else { throw HTTP1ParseError("A trailer field cannot be Content-Length or Transfer-Encoding.") }
    }

    static func hexValue(_ byte: UInt8) -> Int? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return Int(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return Int(byte - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return Int(byte - UInt8(ascii: "A") + 10)
        default: return nil
        }
    }
}

/// How far a chunked body got.
enum ChunkedResult {
    case needMore
    case complete
    case tooLarge
}

extension HTTPField.Name {
    /// `Host`, which the HTTP types keep as the request's authority; the HTTP/1.1 parser
    /// needs the field name itself.
    static let hostField = HTTPField.Name("Host")!
}
