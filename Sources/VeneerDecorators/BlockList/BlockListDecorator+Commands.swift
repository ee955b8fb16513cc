import Foundation
import VeneerConfig
import VeneerCore

extension BlockListDecorator {
    /// `veneer unblock ACCOUNT`: lifts a learned block through the running instance's admin
    /// API (`DELETE /-/blocks/{account}`), or, when none answers, in the block list's store.
    static let unblockCommand = CommandLineAction(
        name: "unblock",
        abstract: "Lift a block that block_list learned from the upstream (through the running instance, or in its store).",
        operand: .init("account", help: "The account (the value of the learn.account_header, or 'veneer' for Veneer's own credentials)."),
        perform: { (context: any CommandLineContext, lists: [BlockListOptions]) in try await unblock(context, lists: lists) })

    /// What `veneer unblock` does with the environment's block `lists`.
    static func unblock(_ context: any CommandLineContext, lists: [BlockListOptions]) async throws -> CommandLineOutcome {
        let spec = context.spec
        let account = context.operand ?? ""
        let notBlocked = CommandLineOutcome.failed("\(account) is not blocked in environment \(spec.name)")
        let encoded = account.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(.init(charactersIn: "-._~"))) ?? account
        if let answer = await context.askInstance(.delete, "blocks/" + encoded, query: [], timeout: .seconds(10)) {
            switch answer.status {
            case 200: return .done("unblocked \(account) (the running instance at \(answer.address))")
            case 404: return notBlocked
            default: break  // refused, or gone meanwhile: the store
            }
        }
        var lifted = false
        var memoryOnly = true
        for name in lists.compactMap(\.store) {
            guard let removed = try await context.withStore(named: name, { try await $0.delete(BlockBook.namespace, account) }) else { continue }
            memoryOnly = false
            lifted = lifted || removed
        }
        if memoryOnly {
            return .failed("nothing to unblock: \(await context.instanceMissing()), and environment "
                + "\(spec.name) keeps its blocks in memory: they end with its process")
        }
        return lifted ? .done("unblocked \(account) (the store)") : notBlocked
    }
}
