import VeneerCore

/// `rate_limit`: lets each caller (or each API key, or everyone together) through at most at
/// a configured rate, and answers the rest at once with `429 Too Many Requests` and a
/// `Retry-After`, without asking anything inside it.
///
/// A decorator knows its own concern and its `inner`, nothing else: it adopts
/// ``StatusReporting`` to show its figures on the status page; its factory adds its admin
/// route and keeps its budgets across reloads.
public struct RateLimitDecorator: Handler, StatusReporting {
    let inner: any Handler
    let book: RateBook
    let clock: any VeneerClock

    /// Wraps `inner`, drawing on `book`'s budgets.
    init(inner: any Handler, book: RateBook, clock: any VeneerClock) {
        self.inner = inner
        self.book = book
        self.clock = clock
    }

    /// Passes the request on while its caller has budget left, else answers 429.
    public func handle(_ request: ProxyRequest) async throws -> ProxyResponse {
        let key = Self.key(of: request, by: book.options.key)
        guard let wait = book.take(key, now: clock.monotonic()) else {
            return try await inner.handle(request)
        }
        // What the access log and Server-Timing say this entry did.
        request.record.append(.init(name: "rate_limit", detail: "limited"))
        return Self.tooManyRequests(retryAfter: wait)
    }

    /// The budget `request` draws on.
    static func key(of request: ProxyRequest, by key: RateLimitOptions.Key) -> String {
        switch key {
        case .client: return request.client?.description ?? "unknown"
        case .header(let name): return HTTPField.Name(name).flatMap { request.headers[$0] } ?? ""
        case .global: return "*"
        }
    }

    /// `429` in Veneer's error form, with `Retry-After` in whole seconds (at least 1).
    static func tooManyRequests(retryAfter wait: Duration) -> ProxyResponse {
        let seconds = max(1, Int((Double(wait.components.seconds) + Double(wait.components.attoseconds) / 1e18).rounded(.up)))
        var body = ByteBuffer(string: #"{"error":"too_many_requests","message":"Too many requests: try again in "#)
        body.writeString("\(seconds) s.\"}\n")
        return .json(.tooManyRequests, body, headers: [.retryAfter: String(seconds), .cacheControl: "no-store"])
    }

    /// Requests let through and refused since this entry's budgets were made, and how many
    /// budgets it keeps.
    public func statusFigures() async -> [StatusFigure] {
        book.tally.figures + [StatusFigure("budgets", book.budgets(at: clock.monotonic()).count)]
    }
}

extension HTTPField.Name {
    /// `Retry-After` (RFC 9110 §10.2.3).
    static let retryAfter = HTTPField.Name("Retry-After")!
}
