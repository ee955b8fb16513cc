import VeneerCore

extension BlockListDecorator: StatusReporting {
    /// Requests refused (by a rule, for a blocked account), blocks learned here, and the
    /// blocks the book holds now (learned by any instance sharing its store).
    public func statusFigures() async -> [StatusFigure] {
        tally.figures + [StatusFigure("blocks_held", book.all.count)]
    }
}
