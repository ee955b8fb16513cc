import Foundation
import Logging
import Synchronization
import VeneerCore

/// A learned block: which account, since when, until when, and why.
public struct Block: Sendable, Equatable {
    /// The account.
    public let account: String
    /// When it was learned.
    public let blockedAt: Date
    /// When it ends; nil: when unblocked.
    public let until: Date?
    /// What the upstream said.
    public let reason: String
    /// Whether the account is a credential (its header is one by ``RequestRedaction``'s
    /// rule, an `X-Api-Key`, or its value says so): then it is shown as a fingerprint,
    /// which also names it to unblock.
    public let isCredential: Bool

    /// The account as the admin API, the status page and the log show it.
    public var shownAccount: String { isCredential ? RequestRedaction.shown.cut(account) : account }

    var json: JSONValue {
        .object([
            ("account", .string(shownAccount)), ("blocked_at", .string(Timestamp.iso8601(blockedAt))),
            ("until", until.map { .string(Timestamp.iso8601($0)) } ?? .null), ("reason", .string(reason)),
        ])
    }

    init(account: String, blockedAt: Date, until: Date?, reason: String, isCredential: Bool = false) {
        self.account = account
        self.blockedAt = blockedAt
        self.until = until
        self.reason = reason
        self.isCredential = isCredential
    }

    init?(account: String, bytes: [UInt8]) {
        guard let value = try? JSONValue.parse(bytes), let reason = value["reason"]?.stringValue,
              let at = value["blocked_at_epoch"]?.doubleValue.flatMap(Date.init(epochSeconds:)) else { return nil }
        let until = value["until_epoch"]?.doubleValue.map(Date.init(epochSeconds:))
        if until == .some(nil) { return nil }
        self.init(account: account, blockedAt: at, until: until ?? nil, reason: reason,
                  isCredential: value["credential"] == .bool(true))
    }

    var stored: StoredValue {
        var members: [(String, JSONValue)] = [("reason", .string(reason)), ("blocked_at_epoch", .number(String(blockedAt.timeIntervalSince1970)))]
        if let until { members.append(("until_epoch", .number(String(until.timeIntervalSince1970)))) }
        if isCredential { members.append(("credential", .bool(true))) }
        return StoredValue(bytes: Array(JSONValue.object(members).text.utf8), expiresAt: until)
    }
}

/// The learned blocks of a `block_list`: in memory for the hot path, in their store for
/// restarts and for other processes (`veneer unblock`, other instances), re-read every second.
public final class BlockBook: CarriedService {
    /// The store namespace of learned blocks.
    public static let namespace = "blocks"

    let store: any KeyValueStore
    let clock: any VeneerClock
    let logger: Logger
    private let blocks = Mutex<[String: Block]>([:])
    /// Whether the last read of the store failed (logged once per outage, not every second).
    private let readFailing = Mutex(false)

    init(store: any KeyValueStore, clock: any VeneerClock, logger: Logger) {
        self.store = store
        self.clock = clock
        self.logger = logger
    }

    /// The block of `account`, if it is blocked now.
    func block(of account: String) -> Block? {
        let now = clock.now()
        return blocks.withLock { blocks in
            guard let block = blocks[account] else { return nil }
            if let until = block.until, until <= now {
                blocks[account] = nil
                return nil
            }
            return block
        }
    }

    /// Records a block (logged once, however many requests saw the signal); `isCredential`:
    /// the account is shown as a fingerprint only.
    func learn(_ account: String, isCredential: Bool = false, reason: String, blockFor: Duration?, requestID: String) async {
        let now = clock.now()
        let block = Block(account: account, blockedAt: now, until: blockFor.map { now.addingTimeInterval($0.seconds) }, reason: reason,
                          isCredential: isCredential)
        let isNew = blocks.withLock { blocks in
            if let existing = blocks[account], existing.until.map({ $0 > now }) ?? true { return false }
            blocks[account] = block
            return true
        }
        guard isNew else { return }
        logger.warning("account blocked", metadata: [
            "account": .string(block.shownAccount), "reason": .string(reason), "request_id": .string(requestID),
            "until": .string(block.until.map(Timestamp.iso8601) ?? "unblocked by an operator"),
        ])
        do {
            try await store.put(Self.namespace, account, block.stored, durable: true)
        } catch {
            logger.error("the block could not be saved; it holds until restart",
                         metadata: ["account": .string(block.shownAccount), "error": .string(ErrorText.describe(error))])
        }
    }

    /// Lifts a block, named by its account or, for a credential, by the fingerprint the
    /// listings show; false when the account was not blocked.
    public func unblock(_ named: String) async -> Bool {
        let (account, shown) = blocks.withLock { blocks in
            let block = blocks[named] ?? blocks.values.first { $0.isCredential && $0.shownAccount == named }
            return (block?.account ?? named, block?.shownAccount ?? named)
        }
        let inMemory = blocks.withLock { $0.removeValue(forKey: account) } != nil
        let inStore = (try? await store.delete(Self.namespace, account)) ?? false
        let lifted = inMemory || inStore
        if lifted { logger.notice("account unblocked", metadata: ["account": .string(shown)]) }
        return lifted
    }

    /// The current blocks, by account.
    public var all: [Block] {
        let now = clock.now()
        return blocks.withLock { $0.values.filter { $0.until.map { $0 > now } ?? true }.sorted { $0.account < $1.account } }
    }

    /// Reads the store into memory (blocks learned or lifted elsewhere).
    func refresh() async {
        do {
            let started = clock.now()
            let stored = try await store.list(Self.namespace, now: started)
            let loaded = stored.compactMap { Block(account: $0.key, bytes: $0.value.bytes) }
            blocks.withLock { blocks in
                // Blocks learned here while the store was being read may not be in it yet: keep them.
                let learnedMeanwhile = blocks.values.filter { $0.blockedAt >= started }
                blocks = Dictionary(loaded.map { ($0.account, $0) }, uniquingKeysWith: { first, _ in first })
                for block in learnedMeanwhile where blocks[block.account] == nil { blocks[block.account] = block }
            }
            if readFailing.withLock({ failing in defer { failing = false }; return failing }) {
                logger.notice("reading blocks from the store works again")
            }
        } catch {
            if !readFailing.withLock({ failing in defer { failing = true }; return failing }) {
                logger.warning("reading blocks from the store failed; keeping the last known state", metadata: ["error": .string(ErrorText.describe(error))])
            }
        }
    }

    public func run() async {
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: .seconds(1))
            } catch {
                return
            }
            await refresh()
        }
    }

    public func close() async {}
}
