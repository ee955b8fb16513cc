import CoreMetrics
import HTTPTypes
import VeneerCore

/// `block_list`: refuses requests by static rules before any network call (403
/// `client_blocked`), and learns blocked accounts from the upstream's signal, after which
/// every request for that account gets 403 `account_blocked` at once, with no upstream call.
public struct BlockListDecorator: Handler {
    let inner: any Handler
    let options: BlockListOptions
    let book: BlockBook
    let denied: Counter
    let accountDenied: Counter

    public func handle(_ request: ProxyRequest) async throws -> ProxyResponse {
        if let rule = options.deny.firstMatch(request) ?? options.allow.firstMiss(request) {
            denied.increment()
            throw ProxyError(.clientBlocked, "This request is refused by a block rule (\(rule)).")
        }
        guard let learn = options.learn else { return try await inner.handle(request) }
        let account: String?
        if let header = learn.accountHeader {
            account = HTTPField.Name(header).flatMap { request.headers[$0] }
        } else {
            account = BlockListOptions.credentialsAccount
        }
        if let account, let block = book.block(of: account) {
            accountDenied.increment()
            _ = block
            throw ProxyError(.accountBlocked, "The account is blocked by the upstream; an operator can lift the block (veneer unblock).")
        }
        let response = try await inner.handle(request)
        if let account, learn.matches(response) {
            await book.learn(account, reason: "the upstream answered \(response.status.code) with the blocked signal",
                             blockFor: learn.blockFor, requestID: request.requestID)
        }
        return response
    }
}
