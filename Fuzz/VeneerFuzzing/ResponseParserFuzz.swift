import HTTPTypes
import NIOCore
import VeneerCore
import VeneerHTTP1

/// The HTTP/1.1 response parser (an upstream's answers: lengths, chunked bodies, bodies until
/// close) on any bytes. The first byte chooses the request method (GET, HEAD or POST) and
/// whether the connection closes after the rest, which is the upstream's stream.
///
/// Checks: no crash or hang; the same responses (and the same refusal) whether the bytes come
/// at once or one at a time; no hop-by-hop field kept; the headers answer by name exactly as
/// their fields do (they are usually read lazily from the lines as they came); and each
/// answer, written as Veneer writes answers to its clients and read back, is the same answer.
public enum ResponseParserFuzz {
    static let maxHeadSize = 1024
    static let maxBodySize = 512
    static let date = "Mon, 23 Nov 2026 00:00:00 GMT"
    static let methods: [HTTPRequest.Method] = [.get, .head, .post]

    struct Response: Equatable, CustomStringConvertible {
        var code: Int
        var fields: [String]
        var body: [UInt8]
        var keepAlive: Bool

        init(_ parsed: HTTP1ResponseParser.Response) {
            code = parsed.response.status.code
            fields = parsed.response.headers.fields.map { "\($0.name.rawName): \($0.value)" }
            body = Array(parsed.response.body.readableBytesView)
            keepAlive = parsed.keepAlive
        }

        var description: String { "\(code) fields=\(fields) body=\(body.count) bytes keepAlive=\(keepAlive)" }
    }

    struct Outcome: Equatable {
        var responses: [Response] = []
        var refused = false
    }

    /// Feeds `bytes` in pieces of `step` bytes (0: all at once), then the close if asked;
    /// `each` sees every response as it comes.
    static func parse(_ bytes: UnsafeRawBufferPointer, method: HTTPRequest.Method, close: Bool, step: Int, headLimit: Int = maxHeadSize,
                      each: (HTTP1ResponseParser.Response) throws(FuzzFinding) -> Void = { _ in }) throws(FuzzFinding) -> Outcome {
        var parser = HTTP1ResponseParser(maxHeadSize: headLimit, maxBodySize: maxBodySize)
        var outcome = Outcome()
        let size = step == 0 ? max(bytes.count, 1) : step
        var offset = 0
        do {
            while offset < bytes.count {
                parser.append(ByteBuffer(bytes: UnsafeRawBufferPointer(rebasing: bytes[offset..<min(offset + size, bytes.count)])))
                offset += size
                while let response = try parser.next(requestMethod: method) {
                    try each(response)
                    outcome.responses.append(Response(response))
                }
            }
            if close, let response = try parser.endOfInput() {
                try each(response)
                outcome.responses.append(Response(response))
            }
        } catch let finding as FuzzFinding {
            throw finding
        } catch {
            outcome.refused = true
        }
        return outcome
    }

    /// The target's body.
    public static func run(_ input: UnsafeRawBufferPointer) throws(FuzzFinding) {
        guard let first = input.first else { return }
        let method = methods[Int(first & 0x7F) % methods.count]
        let close = first & 0x80 != 0
        let bytes = UnsafeRawBufferPointer(rebasing: input[1...])
        let whole = try parse(bytes, method: method, close: close, step: 0) { response throws(FuzzFinding) in
            try check(response, method: method)
        }
        let byByte = try parse(bytes, method: method, close: close, step: 1)
        guard whole == byByte else {
            throw FuzzFinding("""
                the bytes read at once and one at a time differ (\(method)):
                at once: \(whole.responses) refused=\(whole.refused)
                by byte: \(byByte.responses) refused=\(byByte.refused)
                """)
        }
    }

    static let byName: [HTTPField.Name] = [.date, .contentType, .cacheControl, .vary, .eTag, .contentLength, .lastModified, .expires, .age]

    static func check(_ parsed: HTTP1ResponseParser.Response, method: HTTPRequest.Method) throws(FuzzFinding) {
        let headers = parsed.response.headers
        // Asked by name first: on headers read as lines, these answers come from the lines.
        var names = byName
        for field in headers.fields where !names.contains(field.name) { names.append(field.name) }
        let lookups = names.map { (headers.contains($0), headers[values: $0]) }
        let fields = headers.fields
        for (name, (contains, values)) in zip(names, lookups) where contains != fields.contains(name) || values != fields[values: name] {
            throw FuzzFinding("headers by name differ from their fields for \(name): \(contains) \(values) vs \(fields[values: name])")
        }
        for field in fields {
            let name = field.name.canonicalName
            if HopByHop.alwaysRemoved.contains(name) || (name == "content-length" && method != .head) {
                throw FuzzFinding("a hop-by-hop field was kept: \(field)")
            }
        }
        let code = parsed.response.status.code
        guard parsed.response.body.readableBytes <= maxBodySize else { throw FuzzFinding("a body over the limit was accepted") }
        if method == .head || code == 204 || code == 304, parsed.response.body.readableBytes > 0 {
            throw FuzzFinding("a body was read where none can be (\(method), \(code))")
        }
        guard method != .head else { return }

        // Written to a client and read back: the same status, fields (and Date) and body.
        var written = ByteBuffer()
        HTTP1ResponseWriter.write(parsed.response, method: method, close: false, date: date, into: &written)
        let back = try written.withUnsafeReadableBytes { bytes throws(FuzzFinding) in
            // The writer adds Date and Content-Length, and writes a reason phrase's invalid UTF-8 as U+FFFD (three
            // bytes for one): room for them past the limit the answer was read with.
            try parse(bytes, method: method, close: false, step: 0, headLimit: maxHeadSize * 4)
        }
        var expected = Response(parsed)
        if !fields.contains(.date) { expected.fields.append("Date: \(date)") }
        expected.keepAlive = true
        guard !back.refused, back.responses == [expected] else {
            throw FuzzFinding("""
                written and read back, the answer changed:
                parsed: \(expected)
                back:   \(back.responses) refused=\(back.refused)
                wire:   \(String(decoding: written.readableBytesView, as: UTF8.self).debugDescription)
                """)
        }
    }
}
