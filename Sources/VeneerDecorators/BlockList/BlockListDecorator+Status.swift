import VeneerCore

extension BlockListDecorator: StatusReporting, StatusListing {
    /// Requests refused (by a rule, for a blocked account), blocks learned here, and the
    /// blocks the book holds now (learned by any instance sharing its store).
    public func statusFigures() async -> [StatusFigure] {
        tally.figures + [StatusFigure("blocks_held", book.all.count)]
    }

    /// The learned blocks, as `GET /-/blocks` lists them, each with a button that lifts it.
    public func statusTables() async -> [StatusTable] {
        await book.refresh()
        return [StatusTable(
            name: "blocks", title: "Learned blocks",
            columns: [
                .init("account", monospace: true), .init("blocked_at", heading: "since"), .init("until", missing: "until lifted"),
                .init("reason"),
            ],
            empty: "No account is blocked.",
            action: .init(label: "Unblock", pathPrefix: "/-/blocks/", key: "account", fields: [("action", "unblock")]),
            rows: book.all.map(\.json))]
    }
}
