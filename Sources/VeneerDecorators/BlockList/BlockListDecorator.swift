import CoreMetrics
import HTTPTypes
import VeneerCore

/// `block_list`: refuses requests by static rules before any network call (403
/// `client_blocked`), and learns blocked accounts from the upstream's signal, after which
/// every request for that account gets 403 `account_blocked` at once, with no upstream call.
public struct BlockListDecorator: ImmediateAnswering {
    let inner: any Handler
    /// The inner handler's immediate answers (a cache's hits), looked up once: they pass
    /// through without a task when they hold nothing to learn.
    let innerImmediate: (any ImmediateAnswering)?
    let options: BlockListOptions
    /// `options.deny`, worked out once.
    let deny: DenyRules
    let book: BlockBook
    let denied: Counter
    let accountDenied: Counter
    /// The same refusals and the blocks learned here, for the status page.
    let tally = StatusTally(["blocked_by_rule", "blocked_account", "learned"])
    /// The largest streamed body read whole to match the signal's `json` (`limits.response_body`).
    var maxResponseBody = 16 << 20
    /// What such a body is reserved from (`limits.buffered`).
    var buffers = BufferBudget.unbounded

    /// Wraps `inner`.
    init(inner: any Handler, options: BlockListOptions, book: BlockBook, denied: Counter, accountDenied: Counter) {
        self.inner = inner
        innerImmediate = inner as? any ImmediateAnswering
        self.options = options
        deny = DenyRules(options.deny)
        self.book = book
        self.denied = denied
        self.accountDenied = accountDenied
    }

    /// It only passes its inner handler's immediate answers on.
    public var answersImmediately: Bool { false }

    /// The refusal of a rule or of a learned block (thrown by the rest of the work), else the
    /// inner handler's answer: immediate when the inner handler has one that holds nothing to
    /// learn, else once it comes, learned from. ``handle(_:)`` is this, awaited.
    public func answerImmediately(_ request: ProxyRequest) -> ImmediateAnswer {
        if let rule = deny.firstMatch(request) ?? options.allow.firstMiss(request) {
            denied.increment()
            tally.add("blocked_by_rule")
            request.record.append(.init(name: "block_list", detail: "blocked"))
            let error = ProxyError(.clientBlocked, "This request is refused by a block rule (\(rule)).")
            return .later(Deferred { throw error })
        }
        guard let learn = options.learn else {
            if let innerImmediate { return innerImmediate.answerImmediately(request) }
            return .later(Deferred { [inner] in try await inner.handle(request) })
        }
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
            let error = ProxyError(.accountBlocked, "The account is blocked by the upstream; an operator can lift the block (veneer unblock).")
            return .later(Deferred { throw error })
        }
        // What the answer teaches is noted after what is inside: its entry keeps its place.
        let place = request.record.traces ? request.record.place("block_list") : nil
        var rest: Deferred?
        if let innerImmediate {
            switch innerImmediate.answerImmediately(request) {
            case .answer(let response):
                // An answer whose status and headers are not the signal's teaches nothing: passed on now.
                guard learn.matches(head: response) else { return .answer(response) }
                return .later(Deferred { [self] in try await learned(from: response, learn: learn, accounts: accounts, request: request, at: place) })
            case .later(let innerRest):
                rest = innerRest
            }
        }
        return .later(Deferred { [self, rest] in
            let response = if let rest { try await rest() } else { try await inner.handle(request) }
            return try await learned(from: response, learn: learn, accounts: accounts, request: request, at: place)
        })
    }

    /// `response`, after learning from it the block of the one account the request names
    /// when it is the upstream's signal.
    func learned(from response: ProxyResponse, learn: LearnSignal, accounts: [String], request: ProxyRequest,
                 at place: RequestRecord.Place?) async throws -> ProxyResponse {
        var response = response
        // The signal's json is matched on the whole body: a streamed answer that may be the
        // signal (its status and headers match) is read whole, up to limits.response_body.
        if response.isStreamed, !learn.json.isEmpty, learn.matches(head: response) {
            response = try await response.collected(upTo: maxResponseBody, budget: buffers)
        }
        // Learned only for a request that names one account: which of several the upstream
        // meant is not known, and a caller must not get another's account blocked.
        if learn.matches(head: response), Set(accounts).count == 1, let account = accounts.first, learn.matches(response) {
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
