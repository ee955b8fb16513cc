import VeneerConfig
import VeneerCore

extension RateLimitDecorator {
    /// The `rate_limit` entry of a registry: `registry.register(RateLimitDecorator.factory)`.
    public static let factory = DecoratorFactory(
        name: "rate_limit",
        summary: "lets each client (or API key) through at most at a set rate; the rest get 429 with Retry-After",
        options: RateLimitOptions.docs,
        // It may answer without asking what stands inside it (its 429s).
        answersWithoutInner: true,
        decode: RateLimitOptions.decode,
        make: { options, inner, context in
            // The same entry with the same options finds the same budgets after a reload.
            let book = context.carried.value(for: context.entryKey()) { RateBook(options: options) }
            let clock = context.clock
            context.admin.register("rate_limit", endpoints: adminEndpoints) { request in await admin(request, book: book, clock: clock) }
            return RateLimitDecorator(inner: inner, book: book, clock: clock)
        }
    )

    /// What `/-/rate_limit` answers, as `GET /-/` lists it.
    static let adminEndpoints = [
        AdminRoutes.Endpoint(path: "/-/rate_limit", methods: [.get, .delete],
                             summary: "GET: each budget kept and the requests it has left; DELETE ?key=KEY: give that caller its whole burst again, "
                                 + "DELETE without a key: everyone's"),
    ]

    /// `GET /-/rate_limit` lists the budgets; `DELETE /-/rate_limit[?key=KEY]` resets them.
    static func admin(_ request: AdminRequest, book: RateBook, clock: any VeneerClock) async -> ProxyResponse {
        guard request.rest.isEmpty else { return ProxyError.notFound("No such rate_limit resource.").response }
        switch request.method {
        case .get, .head:
            let budgets = book.budgets(at: clock.monotonic()).map { budget in
                JSONValue.object([("key", .string(budget.key)), ("requests_left", .int(budget.tokens))])
            }
            return .json(.ok, JSONValue.array(budgets).buffer, headers: [.cacheControl: "no-store"])
        case .delete:
            let reset = book.reset(request.parameter("key"))
            return .json(.ok, JSONValue.object([("reset", .int(reset))]).buffer, headers: [.cacheControl: "no-store"])
        default:
            var error = ProxyError(.methodNotAllowed, "Use GET /-/rate_limit or DELETE /-/rate_limit[?key=KEY].")
            error.headers[.allow] = "GET, HEAD, DELETE"
            return error.response
        }
    }
}
