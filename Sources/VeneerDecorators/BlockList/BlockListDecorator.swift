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
    /// The same refusals and the blocks learned here, for the status page.
    let tally = StatusTally(["blocked_by_rule", "blocked_account", "learned"])
    /// The largest streamed body read whole to match the signal's `json` (`limits.response_body`).
    var maxResponseBody = 16 << 20
    /// What such a body is reserved from (`limits.buffered`).
    var buffers = BufferBudget.unbounded

    public func handle(_ request: ProxyRequest) async throws -> ProxyResponse {
        if let rule = options.deny.firstMatch(request) ?? options.allow.firstMiss(request) {
            denied.increment()
            tally.add("blocked_by_rule")
            request.record.append(.init(name: "block_list", detail: "blocked"))
            throw ProxyError(.clientBlocked, "This request is refused by a block rule (\(rule)).")
        }
        guard let learn = options.learn else { return try await inner.handle(request) }
        // Every account the request names (a list, a repeated field): any one blocked refuses it.
        let accounts: [String]
        if let header = learn.accountHeader {
            accounts = HTTPField.Name(header).map { RuleSet.elements(of: $0, in: request).map(String.init) } ?? []
        } else {
            accounts = [BlockListOptions.credentialsAccount]
        }
        if accounts.contains(where: { book.block(of: $0) != nil }) {
            accountDenied.increment()
            tally.add("blocked_account")
            request.record.append(.init(name: "block_list", detail: "blocked account"))
            throw ProxyError(.accountBlocked, "The account is blocked by the upstream; an operator can lift the block (veneer unblock).")
        }
        // What the answer teaches is noted after what is inside: its entry keeps its place.
        let place = request.record.traces ? request.record.place("block_list") : nil
        var response = try await inner.handle(request)
        // The signal's json is matched on the whole body: a streamed answer that may be the
        // signal (its status and headers match) is read whole, up to limits.response_body.
        if response.isStreamed, !learn.json.isEmpty, learn.matches(head: response) {
            response = try await response.collected(upTo: maxResponseBody, budget: buffers)
        }
        // Learned only for a request that names one account: which of several the upstream
        // meant is not known, and a caller must not get another's account blocked.
        if Set(accounts).count == 1, let account = accounts.first, learn.matches(response) {
            // A credential (an API key) as the account: the listings show a fingerprint of it.
            let isCredential = learn.accountHeader.map { RequestRedaction.shown.isCredentialHeader($0) } ?? false
                || RequestRedaction.shown.text(account) != account
            await book.learn(account, isCredential: isCredential, reason: "the upstream answered \(response.status.code) with the blocked signal",
                             blockFor: learn.blockFor, requestID: request.requestID)
            tally.add("learned")
            request.record.append(.init(name: "block_list", detail: "learned block"), at: place)
        }
        return response
    }
}
