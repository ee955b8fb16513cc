extension StringProtocol {
    /// The text without leading and trailing spaces and tabs.
    public var trimmingSpaces: Substring {
        let text = Substring(self)
        guard let first = text.firstIndex(where: { $0 != " " && $0 != "\t" }) else { return "" }
        let last = text.lastIndex(where: { $0 != " " && $0 != "\t" })!
        return text[first...last]
    }
}
