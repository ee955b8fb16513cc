import VeneerConfig
import VeneerCore

/// Options of the `replay` origin, decoded once; the HAR files are read here, so that
/// `veneer check` (and a reload) reports a missing or broken file with the line of `file`.
public struct ReplayOriginOptions: Sendable {
    /// What to do with a request nothing was recorded for.
    public enum OnMiss: String, Sendable {
        /// 404 `not_found`.
        case notFound = "not_found"
        /// Forward it to ``ReplayOriginOptions/upstream``.
        case upstream
    }

    /// The HAR files, oldest first.
    public var files: [String]
    /// Their answers.
    public var book: ReplayBook
    /// What a miss gets.
    public var onMiss: OnMiss
    /// The upstream a miss goes to with `on_miss: upstream`.
    public var upstream: UpstreamOriginOptions?

    /// Creates options.
    public init(files: [String], book: ReplayBook, onMiss: OnMiss = .notFound, upstream: UpstreamOriginOptions? = nil) {
        self.files = files
        self.book = book
        self.onMiss = onMiss
        self.upstream = upstream
    }

    static let docs: [OptionDoc] = [
        OptionDoc("file", "file or list", "the HAR file(s) to answer from (required); with several (rotated ones, oldest first), the latest entry still wins"),
        OptionDoc("on_miss", "not_found | upstream", default: "not_found", "what a request nothing was recorded for gets"),
        OptionDoc("upstream", "upstream options", default: "none", "where on_miss: upstream forwards: {url, timeout, ...} as for the upstream origin"),
    ]

    static func decode(_ mapping: ConfigMapping) -> ReplayOriginOptions? {
        let fileValue = mapping.required("file")
        let files = (fileValue?.stringList() ?? []).map { resolve(path: $0, against: mapping.value.context.baseDirectory) }
        if !files.isEmpty { mapping.note("file", files.count == 1 ? .string(files[0]) : .array(files.map(JSONValue.string))) }
        let onMiss = OnMiss(rawValue: mapping.choice("on_miss", ["not_found", "upstream"], default: "not_found")) ?? .notFound
        var upstream: UpstreamOriginOptions?
        if let nested = mapping.mapping("upstream", allowedKeys: UpstreamOrigin.factory.allowedKeys) {
            upstream = UpstreamOriginOptions.decode(nested)
            mapping.note("upstream", .object(nested.summary))
            if onMiss != .upstream { mapping.error("upstream", "is only used with on_miss: upstream") }
        } else if onMiss == .upstream {
            mapping.error("upstream", "required with on_miss: upstream (e.g. upstream: { url: https://staging.example.com })")
        }
        guard let fileValue, !files.isEmpty else { return nil }
        do {
            let book = try ReplayBook.load(files)
            return ReplayOriginOptions(files: files, book: book, onMiss: onMiss, upstream: upstream)
        } catch {
            fileValue.error(error.message)
            return nil
        }
    }
}
