import VeneerCore

extension FaultDecorator: StatusReporting {
    /// The faults injected since this chain was built: requests delayed, answered with a
    /// status instead of the inner handler, and dropped.
    public func statusFigures() async -> [StatusFigure] { tally.figures }
}
