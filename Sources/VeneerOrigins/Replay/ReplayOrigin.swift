import HTTPTypes
import VeneerCore

/// The `replay` origin: answers from recorded HAR files (what `record` writes, or what
/// devtools, Charles and Proxyman export), matching method, path and query, so that a
/// developer records staging once and works offline against the same answers.
public struct ReplayOrigin: Handler {
    let book: ReplayBook
    /// Where misses go with `on_miss: upstream`; nil answers them 404.
    let fallback: (any Handler)?
    /// Requests answered from the recording and those that were not, for the status page.
    let tally = StatusTally(["replayed", "misses"])

    /// Answers from `book`; misses go to `fallback`, or are 404 `not_found` without one.
    public init(book: ReplayBook, fallback: (any Handler)? = nil) {
        self.book = book
        self.fallback = fallback
    }

    /// The recorded answer, else the fallback's, else 404. The record says which (`hit`,
    /// `miss`); a miss answered by the fallback is noted before the fallback's own entry.
    public func handle(_ request: ProxyRequest) async throws -> ProxyResponse {
        if let answer = book.answer(method: request.method.rawValue, path: request.route.path, query: request.query) {
            tally.add("replayed")
            request.record.append(.init(name: "replay", detail: "hit"))
            return ProxyResponse(status: answer.status, headers: answer.headers, body: answer.body)
        }
        tally.add("misses")
        if let fallback {
            request.record.append(.init(name: "replay", detail: "miss"))
            return try await fallback.handle(request)
        }
        request.record.append(.init(name: "replay", detail: "miss"))
        // The query as a recording would hold it: the message may itself be recorded.
        let query = request.query.map { "?" + RequestRedaction.written.query($0) } ?? ""
        throw ProxyError.notFound("Nothing was recorded for \(request.method.rawValue) \(request.route.path)\(query).")
    }
}
