import Foundation
import HTTPTypes
import NIOCore
import VeneerCore
import VeneerHTTP1

/// The answers of one or more HAR files by method, path and query: the latest entry for a
/// request wins (by `startedDateTime`, then by position, later files after earlier ones).
public struct ReplayBook: Sendable {
    /// A recorded answer.
    public struct Answer: Sendable {
        /// The status.
        public var status: HTTPResponse.Status
        /// The headers to answer with (framing, redacted and Veneer's own per-request fields removed).
        public var headers: ProxyHeaders
        /// The body.
        public var body: ByteBuffer
    }

    /// Answers by ``key(method:path:query:)``.
    public private(set) var answers: [String: Answer] = [:]
    /// Entries that could not be used: no body recorded (over `max_body`), or not a request
    /// and a response Veneer can read.
    public private(set) var skipped = 0

    /// An empty book.
    public init() {}

    /// `GET /posts?a=1&b=2`: the query's parameters sorted, so that their order does not matter.
    public static func key(method: String, path: String, query: String?) -> String {
        let parameters = (query ?? "").split(separator: "&", omittingEmptySubsequences: true).sorted()
        return parameters.isEmpty ? "\(method) \(path)" : "\(method) \(path)?\(parameters.joined(separator: "&"))"
    }

    /// The answer for a request, if one was recorded. A query parameter recorded as
    /// `<redacted>` (record cuts `access_token=...`) matches any value of it.
    public func answer(method: String, path: String, query: String?) -> Answer? {
        if let answer = recorded(method: method, path: path, query: query) { return answer }
        // A HEAD is a GET without the body: a recorded GET answers it, with the length of
        // its body (RFC 9110 §9.3.2: the fields a GET would have sent).
        if method == "HEAD", let answer = recorded(method: "GET", path: path, query: query) {
            var headers = answer.headers
            headers[.contentLength] = String(answer.body.readableBytes)
            return Answer(status: answer.status, headers: headers, body: ByteBuffer())
        }
        return nil
    }

    func recorded(method: String, path: String, query: String?) -> Answer? {
        if let answer = answers[Self.key(method: method, path: path, query: query)] { return answer }
        guard let query, !query.isEmpty else { return nil }
        let redacted = RequestRedaction.written.query(query)
        return redacted == query ? nil : answers[Self.key(method: method, path: path, query: redacted)]
    }

    struct LoadError: Error {
        let message: String
    }

    /// Reads HAR files, in order.
    static func load(_ paths: [String]) throws(LoadError) -> ReplayBook {
        var found: [(started: String, order: Int, key: String, answer: Answer)] = []
        var book = ReplayBook()
        for path in paths {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw LoadError(message: "HAR file \(path) \(FileManager.default.fileExists(atPath: path) ? "is not readable" : "does not exist")")
            }
            let value: JSONValue
            do {
                value = try JSONValue.parse(Array(data))
            } catch {
                throw LoadError(message: "HAR file \(path) is not valid JSON: \(error)")
            }
            guard case .array(let entries)? = value["log"]?["entries"] else {
                throw LoadError(message: "HAR file \(path) has no log.entries (is it a HAR file?)")
            }
            for (index, entry) in entries.enumerated() {
                let read: (String, Answer)?
                do {
                    read = try Self.read(entry)
                } catch {
                    throw LoadError(message: "HAR file \(path), entry \(index) (log.entries[\(index)]): \(error.message)")
                }
                guard let (key, answer) = read else {
                    book.skipped += 1
                    continue
                }
                found.append((entry["startedDateTime"]?.stringValue ?? "", found.count, key, answer))
            }
        }
        // ISO 8601 times in UTC with the same precision sort as text; a HAR from elsewhere
        // with offsets may sort a little off, which only matters for entries seconds apart.
        for item in found.sorted(by: { ($0.started, $0.order) < ($1.started, $1.order) }) {
            book.answers[item.key] = item.answer
        }
        return book
    }

    /// Veneer's own per-request fields, never replayed (hop-by-hop fields, those `Connection`
    /// names and `Content-Length` go too, as the upstream origin drops them).
    static let droppedHeaders: Set<String> = ["cache-status", "server-timing", "age"]

    /// An entry replay cannot answer with: a status that is no final answer.
    struct EntryError: Error {
        let message: String
    }

    /// An entry's key and answer; nil for an entry with no answer to give (no request or
    /// response Veneer can read, status 0 as devtools export a request that got none, a
    /// body left out). Throws for an answer replay must never give: an interim (1xx) status
    /// (devtools export a WebSocket handshake as 101), which a client takes for the head of
    /// an answer still to come, or a status no answer has.
    static func read(_ entry: JSONValue) throws(EntryError) -> (String, Answer)? {
        guard let request = entry["request"], let response = entry["response"],
              let method = request["method"]?.stringValue, let url = request["url"]?.stringValue,
              let code = response["status"]?.intValue else { return nil }
        // Devtools record a request that got no answer (blocked, cancelled) with status 0.
        if code <= 0 { return nil }
        guard (200...599).contains(code) else {
            let kind = (100...199).contains(code) ? "an interim answer (1xx), not a final one" : "not an HTTP status (200 to 599)"
            throw EntryError(message: "status \(code) of \(method) \(url) is \(kind); replay cannot answer with it (remove the entry)")
        }
        let content = response["content"]
        if content?["_bodyOmitted"] == .bool(true) { return nil }
        var body = ByteBuffer()
        if let text = content?["text"]?.stringValue {
            if content?["encoding"]?.stringValue == "base64" {
                guard let data = Data(base64Encoded: text) else { return nil }
                body.writeBytes(data)
            } else {
                body.writeString(text)
            }
        }
        // Devtools export a compressed body decoded, as text, under its Content-Encoding:
        // only raw (base64) bytes still carry the encoding that header names.
        let decoded = content?["encoding"]?.stringValue != "base64"
        var fields = HTTPFields()
        var recordedLength: String?
        if case .array(let recorded)? = response["headers"] {
            for field in recorded {
                guard let name = field["name"]?.stringValue, let value = field["value"]?.stringValue,
                      let fieldName = HTTPField.Name(name) else { continue }
                let lower = fieldName.canonicalName
                if lower == "content-length" { recordedLength = value }
                guard !droppedHeaders.contains(lower), !RequestRedaction.holdsMarker(value),
                      !(decoded && lower == "content-encoding") else { continue }
                fields.append(HTTPField(name: fieldName, value: value))
            }
        }
        // Hop-by-hop fields, those the recorded Connection names, and Content-Length (set
        // from the body), as the upstream origin strips them from a live answer.
        HopByHop.strip(&fields)
        var headers = ProxyHeaders(fields)
        // A recorded HEAD says how long its GET's body was: it answers with that length.
        if method.uppercased() == "HEAD", let recordedLength, let length = Int(recordedLength.trimmingSpaces), length >= 0 {
            headers[.contentLength] = String(length)
            body = ByteBuffer()
        }
        let (path, query) = Self.split(url)
        let status = HTTPResponse.Status(code: code, reasonPhrase: response["statusText"]?.stringValue ?? "")
        return (key(method: method.uppercased(), path: path, query: query), Answer(status: status, headers: headers, body: body))
    }

    /// `http://host/posts?x=1` → (`/posts`, `x=1`); a bare path is taken as it is.
    static func split(_ url: String) -> (String, String?) {
        var rest = Substring(url)
        if let scheme = rest.range(of: "://") {
            rest = rest[scheme.upperBound...]
            rest = rest.firstIndex(of: "/").map { rest[$0...] } ?? "/"
        }
        if let hash = rest.firstIndex(of: "#") { rest = rest[..<hash] }
        guard let mark = rest.firstIndex(of: "?") else { return (String(rest), nil) }
        return (String(rest[..<mark]), String(rest[rest.index(after: mark)...]))
    }
}
