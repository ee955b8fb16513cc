import Foundation
import HTTPTypes
import NIOCore
import VeneerCore

/// One exchange as a HAR 1.2 entry (http://www.softwareishard.com/blog/har-12-spec/), with
/// credentials cut by ``RequestRedaction``'s rule (headers, the URL, `Location`, bodies
/// whatever their declared type, compressed ones once decoded) and bodies that cannot be
/// redacted or are over the limit left out (`_bodyOmitted` says so, so that `replay` does not
/// answer with a body that was never recorded).
enum HAREntry {
    static func make(request: ProxyRequest, response: ProxyResponse, started: Date, elapsed: Duration,
                     maxBody: Int, redaction: RequestRedaction, leftOut: (comment: String, size: Int)? = nil) -> JSONValue {
        let milliseconds = JSONValue.number(Timestamp.milliseconds(elapsed))
        let host = request.headers[HTTPField.Name("Host")!].flatMap { $0.isEmpty ? nil : $0 } ?? "localhost"
        var requestMembers: [(String, JSONValue)] = [
            ("method", .string(request.method.rawValue)),
            ("url", .string("http://\(redaction.text(host))\(request.route.path)\(query(request.query, redaction))")),
            ("httpVersion", .string("HTTP/1.1")),
            ("cookies", .array([])),
            ("headers", headers(request.headers.map { ($0.name.rawName, $0.value) }, redaction)),
            ("queryString", .array(redaction.pairs(request.query ?? "").map { pair(($0.name, $0.value ?? "")) })),
            ("headersSize", .int(-1)),
            ("bodySize", .int(request.body.readableBytes)),
        ]
        if request.body.readableBytes > 0 {
            let mimeType = request.headers[.contentType] ?? "application/octet-stream"
            var postData: [(String, JSONValue)] = [("mimeType", .string(mimeType))]
            switch body(request.body, mimeType: mimeType, contentEncoding: request.headers[.contentEncoding], maxBody: maxBody, redaction) {
            case .text(let text, _):
                postData.append(("text", .string(text)))
            case .binary:
                // postData has no encoding: bytes that are not text cannot be written faithfully.
                postData.append(contentsOf: omitted("a body of \(request.body.readableBytes) bytes that is not text left out", text: true))
            case .omitted(let comment):
                postData.append(contentsOf: omitted(comment, text: true))
            }
            requestMembers.append(("postData", .object(postData)))
        }
        let mimeType = response.headers[.contentType] ?? "application/octet-stream"
        let bodySize = leftOut?.size ?? response.body.readableBytes
        var content: [(String, JSONValue)] = [("size", .int(bodySize)), ("mimeType", .string(mimeType))]
        let kept: Body = leftOut.map { .omitted($0.comment) }
            ?? body(response.body, mimeType: mimeType, contentEncoding: response.headers[.contentEncoding], maxBody: maxBody, redaction)
        switch kept {
        case .text(let text, let decodedSize):
            content[0] = ("size", .int(decodedSize))
            if decodedSize != response.body.readableBytes { content.append(("compression", .int(decodedSize - response.body.readableBytes))) }
            content.append(("text", .string(text)))
        case .binary:
            content.append(("text", .string(Data(response.body.readableBytesView).base64EncodedString())))
            content.append(("encoding", .string("base64")))
        case .omitted(let comment):
            content.append(contentsOf: omitted(comment, text: false))
        }
        let responseMembers: [(String, JSONValue)] = [
            ("status", .int(response.status.code)),
            ("statusText", .string(response.status.reasonPhrase)),
            ("httpVersion", .string("HTTP/1.1")),
            ("cookies", .array([])),
            ("headers", headers(response.headers.map { ($0.name.rawName, $0.value) }, redaction)),
            ("content", .object(content)),
            ("redirectURL", .string(redaction.header("Location", response.headers[.location] ?? ""))),
            ("headersSize", .int(-1)),
            ("bodySize", .int(bodySize)),
        ]
        return .object([
            ("startedDateTime", .string(Timestamp.iso8601(started))),
            ("time", milliseconds),
            ("request", .object(requestMembers)),
            ("response", .object(responseMembers)),
            ("cache", .object([])),
            ("timings", .object([("send", .int(0)), ("wait", milliseconds), ("receive", .int(0))])),
            ("_requestId", .string(request.requestID)),
        ])
    }

    static func query(_ query: String?, _ redaction: RequestRedaction) -> String {
        guard let query, !query.isEmpty else { return "" }
        return "?" + redaction.query(query)
    }

    static func pair(_ pair: (String, String)) -> JSONValue {
        .object([("name", .string(pair.0)), ("value", .string(pair.1))])
    }

    static func headers(_ fields: [(String, String)], _ redaction: RequestRedaction) -> JSONValue {
        .array(fields.map { pair(($0.0, redaction.header($0.0, $0.1))) })
    }

    /// The members of a body left out: a comment saying why, and `_bodyOmitted`.
    static func omitted(_ comment: String, text: Bool) -> [(String, JSONValue)] {
        var members: [(String, JSONValue)] = text ? [("text", .string(""))] : []
        members.append(("comment", .string(comment)))
        members.append(("_bodyOmitted", .bool(true)))
        return members
    }

    /// What a body becomes in the file.
    enum Body: Equatable {
        /// Text with its credentials cut, and the size of the content it was read from.
        case text(String, decodedSize: Int)
        /// Bytes that are not text: written as they are (base64), since nothing in them can
        /// be read to redact.
        case binary
        /// Left out, and why.
        case omitted(String)
    }

    /// A body as the file holds it: decoded first when it is compressed (what is compressed
    /// cannot be redacted; a coding Veneer cannot undo leaves the body out), then redacted as
    /// text whatever its declared type (JSON sent as `text/plain` or with no type at all).
    static func body(_ body: ByteBuffer, mimeType: String, contentEncoding: String?, maxBody: Int, _ redaction: RequestRedaction) -> Body {
        guard body.readableBytes <= maxBody else { return .omitted("body of \(body.readableBytes) bytes left out (over max_body)") }
        let content: [UInt8]
        let decoded: Bool
        switch ContentDecoding.decode(body, contentEncoding: contentEncoding, limit: maxBody) {
        case .identity:
            (content, decoded) = (Array(body.readableBytesView), false)
        case .decoded(let bytes):
            (content, decoded) = (bytes, true)
        case .tooLarge:
            return .omitted("body decoded to over max_body, left out")
        case .unreadable(let what):
            return .omitted("\(what) cannot be read to redact it, left out")
        }
        guard let text = text(content, mimeType: mimeType, redaction) else {
            // Decoded bytes that are not text are kept as they came, still encoded: replay
            // answers base64 bodies with the Content-Encoding they were recorded under.
            return .binary
        }
        return .text(text, decodedSize: decoded ? content.count : body.readableBytes)
    }

    /// The body as text with credentials cut (JSON members at any depth, form fields,
    /// `Bearer` values and tokens in URLs anywhere); nil when it is not UTF-8 text.
    static func text(_ bytes: [UInt8], mimeType: String, _ redaction: RequestRedaction) -> String? {
        guard let text = String(validating: bytes, as: UTF8.self) else { return nil }
        // JSON whatever the declared type says: a JSON body sent as text/plain is still JSON.
        if let first = bytes.first(where: { $0 != 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D }),
           first == UInt8(ascii: "{") || first == UInt8(ascii: "[") || mimeType.lowercased().contains("json"),
           let value = try? JSONValue.parse(bytes) {
            let redacted = redaction.json(value)
            // Unchanged bodies keep their own bytes (spacing, number forms).
            return redacted == value ? text : redacted.text
        }
        if mimeType.lowercased().hasPrefix("application/x-www-form-urlencoded") { return redaction.query(text) }
        return redaction.text(text)
    }
}
