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
    private let book = Mutex(Book())
    /// Whether the last read of the store failed (logged once per outage, not every second).
    private let readFailing = Mutex(false)

    /// What is in memory, and the changes made here that a read of the store may not show yet.
    ///
    /// A read of the store (``refresh()``) replaces the blocks with what it found, except for the
    /// accounts learned or lifted here whose write the read may have missed: the write had not
    /// ended when the read began (the store read before it committed, then the read's answer
    /// came after it), or it failed (then the change holds here and is written again every
    /// second until the store takes it). Reads are numbered as they begin; a write that ends
    /// while `reads` is n is shown by read n + 1 on.
    private struct Book {
        /// Where a change made here stands in the store.
        enum Write: Equatable {
            /// Under way.
            case pending
            /// Failed: ``BlockBook/retryFailedWrites()`` writes it again.
            case failed
            /// Written: reads numbered from this one on show it.
            case shown(from: Int)
        }
        var blocks: [String: Block] = [:]
        /// Per account: its block here (nil: lifted here), and its write.
        var local: [String: (block: Block?, write: Write)] = [:]
        /// How many reads of the store have begun.
        var reads = 0
        /// The read whose answer the blocks hold: an older one that ends later is not applied.
        var applied = 0

        /// The change to `account` was written to the store: reads begun from now on show it.
        mutating func written(_ account: String, _ block: Block?) {
            guard let change = local[account], change.block == block else { return }
            local[account]?.write = .shown(from: reads + 1)
        }

        /// The write of the change to `account` failed (unless a newer change replaced it).
        mutating func failed(_ account: String, _ block: Block?) {
            guard let change = local[account], change.block == block else { return }
            local[account]?.write = .failed
        }
    }

    init(store: any KeyValueStore, clock: any VeneerClock, logger: Logger) {
        self.store = store
        self.clock = clock
        self.logger = logger
    }

    /// The block of `account`, if it is blocked now.
    func block(of account: String) -> Block? {
        let now = clock.now()
        return book.withLock { book in
            guard let block = book.blocks[account] else { return nil }
            if let until = block.until, until <= now {
                book.blocks[account] = nil
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
        let isNew = book.withLock { book in
            if let existing = book.blocks[account], existing.until.map({ $0 > now }) ?? true { return false }
            book.blocks[account] = block
            book.local[account] = (block, .pending)
            return true
        }
        guard isNew else { return }
        logger.warning("account blocked", metadata: [
            "account": .string(block.shownAccount), "reason": .string(reason), "request_id": .string(requestID),
            "until": .string(block.until.map(Timestamp.iso8601) ?? "unblocked by an operator"),
        ])
        do {
            try await store.put(Self.namespace, account, block.stored, durable: true)
            book.withLock { $0.written(account, block) }
        } catch {
            book.withLock { $0.failed(account, block) }
            logger.error("the block could not be saved; it holds here and is saved again every second",
                         metadata: ["account": .string(block.shownAccount), "error": .string(ErrorText.describe(error))])
        }
    }

    /// Lifts a block, named by its account or, for a credential, by the fingerprint the
    /// listings show; false when the account was not blocked.
    public func unblock(_ named: String) async -> Bool {
        let (account, shown, inMemory) = book.withLock { book in
            let block = book.blocks[named] ?? book.blocks.values.first { $0.isCredential && $0.shownAccount == named }
            let account = block?.account ?? named
            let inMemory = book.blocks.removeValue(forKey: account) != nil
            book.local[account] = (nil, .pending)
            return (account, block?.shownAccount ?? named, inMemory)
        }
        var inStore = false
        do {
            inStore = try await store.delete(Self.namespace, account)
            book.withLock { $0.written(account, nil) }
        } catch {
            book.withLock { $0.failed(account, nil) }
            logger.error("the block could not be removed from the store; it stays lifted here and is removed again every second",
                         metadata: ["account": .string(shown), "error": .string(ErrorText.describe(error))])
        }
        let lifted = inMemory || inStore
        if lifted { logger.notice("account unblocked", metadata: ["account": .string(shown)]) }
        return lifted
    }

    /// The current blocks, by account.
    public var all: [Block] {
        let now = clock.now()
        return book.withLock { $0.blocks.values.filter { $0.until.map { $0 > now } ?? true }.sorted { $0.account < $1.account } }
    }

    /// Reads the store into memory (blocks learned or lifted elsewhere).
    func refresh() async {
        do {
            let read = book.withLock { book in
                book.reads += 1
                return book.reads
            }
            let stored = try await store.list(Self.namespace, now: clock.now())
            let loaded = stored.compactMap { Block(account: $0.key, bytes: $0.value.bytes) }
            book.withLock { book in
                guard read > book.applied else { return }
                book.applied = read
                book.blocks = Dictionary(loaded.map { ($0.account, $0) }, uniquingKeysWith: { first, _ in first })
                // What was learned or lifted here and may not be in what was read: kept as it is here.
                for (account, change) in book.local {
                    if case .shown(let from) = change.write, read >= from {
                        book.local[account] = nil
                    } else {
                        book.blocks[account] = change.block
                    }
                }
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
            await retryFailedWrites()
            await refresh()
        }
    }

    /// Writes again the changes whose write failed (the store was down); a block whose time
    /// is over needs no write and is forgotten.
    func retryFailedWrites() async {
        let now = clock.now()
        let failed = book.withLock { book -> [(String, Block?)] in
            var failed: [(String, Block?)] = []
            for (account, change) in book.local where change.write == .failed {
                if let until = change.block?.until, until <= now {
                    book.local[account] = nil
                    continue
                }
                book.local[account]?.write = .pending
                failed.append((account, change.block))
            }
            return failed
        }
        for (account, block) in failed {
            do {
                if let block {
                    try await store.put(Self.namespace, account, block.stored, durable: true)
                } else {
                    try await store.delete(Self.namespace, account)
                }
                book.withLock { $0.written(account, block) }
                if let block {
                    logger.notice("a block kept here is now saved", metadata: ["account": .string(block.shownAccount)])
                } else {
                    // The account of a lift may be a credential: not logged.
                    logger.notice("a lift kept here is now in the store")
                }
            } catch {
                book.withLock { $0.failed(account, block) }
            }
        }
    }

    public func close() async {}
}
