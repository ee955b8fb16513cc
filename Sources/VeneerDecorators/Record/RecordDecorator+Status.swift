import VeneerCore

extension RecordDecorator: StatusReporting {
    /// Exchanges written to the HAR file since this chain was built (and those that could
    /// not be), and the file.
    public func statusFigures() async -> [StatusFigure] {
        tally.figures + [StatusFigure("file", .string(writer.path))]
    }
}
