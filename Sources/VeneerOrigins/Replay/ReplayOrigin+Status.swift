import VeneerCore

extension ReplayOrigin: StatusReporting {
    /// Requests answered from the recording, misses (sent on with `on_miss: upstream`, else
    /// 404), and how many distinct answers (method, path and query) the recording holds.
    public func statusFigures() async -> [StatusFigure] {
        tally.figures + [StatusFigure("recorded_answers", book.answers.count)]
    }
}
