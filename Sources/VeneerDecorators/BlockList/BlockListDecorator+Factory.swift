import CoreMetrics
import Foundation
import HTTPTypes
import NIOCore
import VeneerConfig
import VeneerCore

extension BlockListDecorator {
    /// The `block_list` entry of the registry.
    public static let factory = DecoratorFactory(
        name: "block_list",
        summary: "refuses requests by client, header, method or route, and accounts the upstream says are blocked, without a network call",
        options: BlockListOptions.docs,
        metrics: [MetricDescription("veneer_block_list_denied_total", "Requests denied by block_list, by reason.")],
        commands: [unblockCommand],
        decode: BlockListOptions.decode,
        make: { (options: BlockListOptions, inner: any Handler, context: BuildContext) in
            let store = try await context.stores.store(named: options.store ?? "memory")
            // The blocks belong to the store, not to the rules: editing rules keeps them. The
            // store object, not its name: a redefined store is a new book over the new store.
            let book = context.carried.value(for: .shared("block_list", store.description, ObjectIdentifier(store as AnyObject))) {
                BlockBook(store: store, clock: context.clock, logger: context.logger)
            }
            await book.refresh()
            context.admin.register("blocks", endpoints: adminEndpoints) { request in await BlockListDecorator.admin(request, book: book) }
            var decorator = BlockListDecorator(
                inner: inner, options: options, book: book,
                denied: Counter(label: "veneer_block_list_denied_total", dimensions: [("reason", "rule")], factory: context.metrics),
                accountDenied: Counter(label: "veneer_block_list_denied_total", dimensions: [("reason", "account")], factory: context.metrics))
            decorator.maxResponseBody = context.limits.responseBody
            decorator.buffers = context.buffers
            return decorator
        },
        warn: { (_: BlockListOptions, environment: EnvironmentSpec, site: ChainSite) in orderWarnings(environment, site) }
    )

    /// A block_list inside an entry that answers by itself (a cache): a denied client or a
    /// blocked account still gets that entry's answers, stale ones included.
    static func orderWarnings(_ environment: EnvironmentSpec, _ site: ChainSite) -> [String] {
        environment.chain.prefix(site.index).filter(\.factory.answersWithoutInner).map { outside in
            "block_list stands inside \(outside.name) (chain[\(outside.site.index)]): a denied client or a blocked account still gets "
                + "\(outside.name)'s answers (a stale_if_error copy too); put block_list before \(outside.name)"
        }
    }

    /// What `/-/blocks` answers, as `GET /-/` lists it.
    static let adminEndpoints = [
        AdminRoutes.Endpoint(path: "/-/blocks", methods: [.get], summary: "the learned blocks of the chain's block_list: each account, when it was blocked, until when, and why"),
        AdminRoutes.Endpoint(
            path: "/-/blocks/{account}", methods: [.delete, .post],
            summary: "DELETE: lift the account's learned block (what veneer unblock sends), 404 when it is not blocked; "
                + "POST with the form field action=unblock: the same, from the status page's button (a browser is sent back to /-/, 303)"),
    ]

    /// `GET /-/blocks` lists the blocks; `DELETE /-/blocks/{account}` lifts one.
    static func admin(_ request: AdminRequest, book: BlockBook) async -> ProxyResponse {
        switch (request.method, request.rest.isEmpty) {
        case (.get, true), (.head, true):
            await book.refresh()
            var body = JSONValue.array(book.all.map(\.json)).buffer
            body.writeStaticString("\n")
            return .json(.ok, body, headers: [.cacheControl: "no-store"])
        case (.delete, false):
            let account = request.rest.removingPercentEncoding ?? request.rest
            guard await book.unblock(account) else {
                return ProxyError.notFound("The account is not blocked.").response
            }
            return .json(.ok, JSONValue.object([("unblocked", .string(account))]).buffer)
        case (.post, false) where request.formValue("action") == "unblock":
            // The status page's button: an HTML form can only GET or POST. The edge let it in
            // only from the page's own origin (same-origin), like any change to the admin API.
            let account = request.rest.removingPercentEncoding ?? request.rest
            let lifted = await book.unblock(account)
            if request.acceptsHTML {
                return ProxyResponse(status: .seeOther, headers: [.location: "/-/", .cacheControl: "no-store"])
            }
            guard lifted else { return ProxyError.notFound("The account is not blocked.").response }
            return .json(.ok, JSONValue.object([("unblocked", .string(account))]).buffer)
        default:
            var error = ProxyError(.methodNotAllowed,
                                   "Use GET /-/blocks, DELETE /-/blocks/{account}, or POST /-/blocks/{account} with the form field action=unblock.")
            error.headers[.allow] = request.rest.isEmpty ? "GET, HEAD" : "DELETE, POST"
            return error.response
        }
    }
}
