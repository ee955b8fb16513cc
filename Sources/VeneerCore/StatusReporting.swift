import Foundation
import Synchronization

/// One live figure a handler shows on the status page (`GET /-/`, `GET /-/status`): a
/// counter, a size, a ratio, a token's expiry.
public struct StatusFigure: Sendable, Equatable {
    /// A short name (`hits`, `entries`, `token_expires_in_seconds`).
    public let name: String
    /// Its value: a number, a string, or null when there is none (no token held yet).
    public let value: JSONValue

    /// A figure.
    public init(_ name: String, _ value: JSONValue) {
        self.name = name
        self.value = value
    }

    /// A counter.
    public init(_ name: String, _ count: Int) {
        self.init(name, .int(count))
    }
}

/// A handler that can say how it is doing, for the status page: the cache its hits and
/// size, auth_refresh its refreshes and the token's expiry, block_list its blocks, fault the
/// faults it injected. An optional capability: the status page shows any other handler as
/// a box with its name only.
///
/// Counters count from the moment the object holding them was made: state a reload carries
/// over (a cache's storage, a token manager, learned blocks) keeps its counts; a decorator
/// built afresh starts again at zero.
public protocol StatusReporting: Sendable {
    /// The figures, in the order they are shown.
    func statusFigures() async -> [StatusFigure]
}

/// A handful of named counters, counted without a lock (relaxed atomics: a status page
/// needs no ordering between them), for ``StatusReporting``.
public final class StatusTally: Sendable {
    /// One counter.
    private final class Slot: Sendable {
        let value = Atomic<Int>(0)
    }

    /// The counters' names, in the order ``figures`` lists them.
    public let names: [String]
    private let slots: [Slot]

    /// Counters called `names`, all zero.
    public init(_ names: [String]) {
        self.names = names
        slots = names.map { _ in Slot() }
    }

    /// Adds `amount` to the counter called `name` (a name it does not have is ignored).
    @inline(__always)
    public func add(_ name: String, _ amount: Int = 1) {
        // A few names: a linear search of short strings is cheaper than hashing one.
        for index in names.indices where names[index] == name {
            slots[index].value.wrappingAdd(amount, ordering: .relaxed)
            return
        }
    }

    /// Adds `amount` to the counter at `index` in ``names`` (an index it does not have is ignored).
    @inline(__always)
    public func add(at index: Int, _ amount: Int = 1) {
        guard slots.indices.contains(index) else { return }
        slots[index].value.wrappingAdd(amount, ordering: .relaxed)
    }

    /// The counter called `name` (0 for a name it does not have).
    public subscript(name: String) -> Int {
        guard let index = names.firstIndex(of: name) else { return 0 }
        return slots[index].value.load(ordering: .relaxed)
    }

    /// Every counter, as figures.
    public var figures: [StatusFigure] {
        zip(names, slots).map { StatusFigure($0, $1.value.load(ordering: .relaxed)) }
    }
}

/// A table a handler shows on the status page under a heading of its own, live (block_list's
/// learned blocks), each row with a button that posts a form to the admin API if the table
/// has a ``StatusTable/RowAction``. An optional capability, like ``StatusReporting``.
public protocol StatusListing: Sendable {
    /// The tables, each with its rows as they are now.
    func statusTables() async -> [StatusTable]
}

/// One table of ``StatusListing``: its rows are JSON objects, shown by column.
public struct StatusTable: Sendable {
    /// One column: the member of each row it shows.
    public struct Column: Sendable {
        /// The row member shown (`account`); also the cell's class on the page.
        public let key: String
        /// The heading.
        public let heading: String
        /// What a row without the member (or with null) shows.
        public let missing: String
        /// Whether it is shown in a fixed-width font (an account, a path).
        public let monospace: Bool

        /// A column showing member `key`.
        public init(_ key: String, heading: String? = nil, missing: String = "", monospace: Bool = false) {
            self.key = key
            self.heading = heading ?? key.replacingOccurrences(of: "_", with: " ")
            self.missing = missing
            self.monospace = monospace
        }
    }

    /// A button on each row: a form posted to `pathPrefix` + the row's `key` member (one
    /// percent-encoded path segment), with hidden `fields`.
    public struct RowAction: Sendable {
        /// The button's label (`Unblock`).
        public let label: String
        /// The admin path the form posts to, up to the row's part (`/-/blocks/`).
        public let pathPrefix: String
        /// The row member that ends the path (`account`).
        public let key: String
        /// The form's hidden fields (`action=unblock`).
        public let fields: [(name: String, value: String)]

        /// A button labelled `label`.
        public init(label: String, pathPrefix: String, key: String, fields: [(name: String, value: String)]) {
            self.label = label
            self.pathPrefix = pathPrefix
            self.key = key
            self.fields = fields
        }
    }

    /// Its name: the member of `GET /-/status` that lists its rows, and its id on the page
    /// (`blocks`). Tables of one name (two decorators of a kind) are shown as one.
    public let name: String
    /// The heading it is shown under (`Learned blocks`).
    public let title: String
    /// Its columns, in order.
    public let columns: [Column]
    /// What an empty table says (`No account is blocked.`).
    public let empty: String
    /// The button of each row, if any.
    public let action: RowAction?
    /// The rows, JSON objects.
    public var rows: [JSONValue]

    /// A table.
    public init(name: String, title: String, columns: [Column], empty: String, action: RowAction? = nil, rows: [JSONValue]) {
        self.name = name
        self.title = title
        self.columns = columns
        self.empty = empty
        self.action = action
        self.rows = rows
    }
}
