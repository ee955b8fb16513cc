import Foundation
import HTTPTypes
import NIOCore
import VeneerCore

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

    /// The answer for a request, if one was recorded.
    public func answer(method: String, path: String, query: String?) -> Answer? {
        if let answer = answers[Self.key(method: method, path: path, query: query)] { return answer }
        // A HEAD is a GET without the body: a recorded GET answers it.
        if method == "HEAD", let answer = answers[Self.key(method: "GET", path: path, query: query)] {
            return Answer(status: answer.status, headers: answer.headers, body: ByteBuffer())
        }
        return nil
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
            for entry in entries {
                guard let (key, answer) = Self.read(entry) else {
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

    static let droppedHeaders: Set<String> = ["content-length", "transfer-encoding", "connection", "keep-alive", "cache-status", "server-timing", "age"]

    static func read(_ entry: JSONValue) -> (String, Answer)? {
        guard let request = entry["request"], let response = entry["response"],
              let method = request["method"]?.stringValue, let url = request["url"]?.stringValue,
              let code = response["status"]?.intValue, (100...599).contains(code) else { return nil }
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
        var headers = ProxyHeaders()
        if case .array(let fields)? = response["headers"] {
            for field in fields {
                guard let name = field["name"]?.stringValue, let value = field["value"]?.stringValue,
                      !droppedHeaders.contains(name.lowercased()), value != Secret.redacted,
                      !(decoded && name.lowercased() == "content-encoding"),
                      let fieldName = HTTPField.Name(name) else { continue }
                headers.append(HTTPField(name: fieldName, value: value))
            }
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
