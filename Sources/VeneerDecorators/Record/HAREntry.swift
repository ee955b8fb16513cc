import Foundation
import HTTPTypes
import NIOCore
import VeneerCore

/// One exchange as a HAR 1.2 entry (http://www.softwareishard.com/blog/har-12-spec/), with
/// credentials redacted and bodies over the limit left out (`_bodyOmitted` says so, so that
/// `replay` does not answer with a body that was never recorded).
enum HAREntry {
    static func make(request: ProxyRequest, response: ProxyResponse, started: Date, elapsed: Duration,
                     maxBody: Int, redaction: Redaction) -> JSONValue {
        let milliseconds = JSONValue.number(Timestamp.milliseconds(elapsed))
        let host = request.headers[HTTPField.Name("Host")!].flatMap { $0.isEmpty ? nil : $0 } ?? "localhost"
        var requestMembers: [(String, JSONValue)] = [
            ("method", .string(request.method.rawValue)),
            ("url", .string("http://\(host)\(request.route.path)\(query(request.query, redaction))")),
            ("httpVersion", .string("HTTP/1.1")),
            ("cookies", .array([])),
            ("headers", headers(request.headers.map { ($0.name.rawName, $0.value) }, redaction)),
            ("queryString", .array(redaction.pairs(request.query ?? "").map(pair))),
            ("headersSize", .int(-1)),
            ("bodySize", .int(request.body.readableBytes)),
        ]
        if request.body.readableBytes > 0 {
            let mimeType = request.headers[.contentType] ?? "application/octet-stream"
            var postData: [(String, JSONValue)] = [("mimeType", .string(mimeType))]
            if request.body.readableBytes > maxBody {
                postData.append(("text", .string("")))
                postData.append(("comment", .string("body of \(request.body.readableBytes) bytes left out (over max_body)")))
                postData.append(("_bodyOmitted", .bool(true)))
            } else {
                postData.append(("text", .string(text(request.body, mimeType: mimeType, redaction) ?? String(decoding: request.body.readableBytesView, as: UTF8.self))))
            }
            requestMembers.append(("postData", .object(postData)))
        }
        let mimeType = response.headers[.contentType] ?? "application/octet-stream"
        var content: [(String, JSONValue)] = [("size", .int(response.body.readableBytes)), ("mimeType", .string(mimeType))]
        if response.body.readableBytes > maxBody {
            content.append(("comment", .string("body of \(response.body.readableBytes) bytes left out (over max_body)")))
            content.append(("_bodyOmitted", .bool(true)))
        } else if let text = text(response.body, mimeType: mimeType, redaction) {
            content.append(("text", .string(text)))
        } else {
            content.append(("text", .string(Data(response.body.readableBytesView).base64EncodedString())))
            content.append(("encoding", .string("base64")))
        }
        let responseMembers: [(String, JSONValue)] = [
            ("status", .int(response.status.code)),
            ("statusText", .string(response.status.reasonPhrase)),
            ("httpVersion", .string("HTTP/1.1")),
            ("cookies", .array([])),
            ("headers", headers(response.headers.map { ($0.name.rawName, $0.value) }, redaction)),
            ("content", .object(content)),
            ("redirectURL", .string(response.headers[.location] ?? "")),
            ("headersSize", .int(-1)),
            ("bodySize", .int(response.body.readableBytes)),
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

    static func query(_ query: String?, _ redaction: Redaction) -> String {
        guard let query, !query.isEmpty else { return "" }
        return "?" + redaction.pairs(query).map { "\($0.0)=\($0.1)" }.joined(separator: "&")
    }

    static func pair(_ pair: (String, String)) -> JSONValue {
        .object([("name", .string(pair.0)), ("value", .string(pair.1))])
    }

    static func headers(_ fields: [(String, String)], _ redaction: Redaction) -> JSONValue {
        .array(fields.map { pair(($0.0, redaction.header($0.0, $0.1))) })
    }

    /// The body as text with credentials redacted (JSON members, form fields); nil when it is
    /// not UTF-8 text (then it is recorded as base64).
    static func text(_ body: ByteBuffer, mimeType: String, _ redaction: Redaction) -> String? {
        let bytes = Array(body.readableBytesView)
        guard let text = String(validating: bytes, as: UTF8.self) else { return nil }
        let type = mimeType.lowercased()
        if type.contains("json"), let value = try? JSONValue.parse(bytes) {
            let redacted = redaction.json(value)
            // Unchanged bodies keep their own bytes (spacing, number forms).
            return redacted == value ? text : redacted.text
        }
        if type.hasPrefix("application/x-www-form-urlencoded") {
            return redaction.pairs(text).map { "\($0.0)=\($0.1)" }.joined(separator: "&")
        }
        return text
    }
}
