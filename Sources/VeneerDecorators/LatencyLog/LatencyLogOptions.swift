import VeneerConfig
import VeneerCore

/// Options of `latency_log`, decoded once.
public struct LatencyLogOptions: Sendable, Hashable {
    /// Names this measuring point in log lines and metrics.
    public var label: String
    /// Requests slower than this are flagged `"slow": true`; nil: never.
    public var slow: Duration?
    /// The file to append to; nil writes to standard output (the journal under systemd).
    public var file: String?

    /// Creates options.
    public init(label: String, slow: Duration? = nil, file: String? = nil) {
        self.label = label
        self.slow = slow
        self.file = file
    }

    static let docs: [OptionDoc] = [
        OptionDoc("label", "text", default: "its position in the chain", "names this measuring point in log lines and metrics"),
        OptionDoc("slow", "duration", default: "off", "flag requests slower than this"),
        OptionDoc("file", "file", default: "stdout", "append JSON lines to this file (reopened on SIGHUP) instead of stdout"),
    ]

    static func decode(_ mapping: ConfigMapping, site: ChainSite) -> LatencyLogOptions? {
        let label = mapping.string("label", default: String(site.index)) ?? String(site.index)
        var slow: Duration?
        if let value = mapping["slow"], value.scalarText() != "off" {
            slow = mapping.duration("slow", in: .init(.milliseconds(1) ... .seconds(3600)))
        } else {
            mapping.note("slow", .string("off"))
        }
        let file = mapping.filePath("file")
        if file == nil { mapping.note("file", .string("stdout")) }
        // What the chain's build would refuse (veneer run exits 78), told by veneer check too.
        if let file, let problem = FileCheck.openProblem(file, folders: .all) { mapping.error("file", "cannot open \(file): \(problem)") }
        return LatencyLogOptions(label: label, slow: slow, file: file)
    }
}
