import VeneerConfig
import VeneerCore

/// Options of `record`, decoded once.
public struct RecordOptions: Sendable, Hashable {
    /// The HAR file written to.
    public var file: String
    /// Bodies larger than this are left out of the file (noted in the entry).
    public var maxBody: Int
    /// When the file would grow past this, it is rotated (`NAME.1.har`, `NAME.2.har`, ...).
    public var maxFileSize: Int
    /// How many rotated files are kept.
    public var keep: Int
    /// Header names redacted besides the built-in ones (lowercased).
    public var redactHeaders: Set<String>

    /// Creates options.
    public init(file: String, maxBody: Int = 64 << 10, maxFileSize: Int = 50 << 20, keep: Int = 5, redactHeaders: Set<String> = []) {
        self.file = file
        self.maxBody = maxBody
        self.maxFileSize = maxFileSize
        self.keep = keep
        self.redactHeaders = redactHeaders
    }

    static let docs: [OptionDoc] = [
        OptionDoc("file", "file", "the HAR 1.2 file to write (required); appended to when it is one Veneer wrote"),
        OptionDoc("max_body", "size", default: "64KB", "larger request or response bodies are left out of the file"),
        OptionDoc("max_file_size", "size", default: "50MB", "rotate the file when it would grow past this"),
        OptionDoc("keep", "integer", default: "5", "how many rotated files (NAME.1.har, NAME.2.har, ...) to keep"),
        OptionDoc("redact_headers", "list", default: "[]",
                  "more header names whose values are redacted (Authorization, Cookie, Set-Cookie and token, secret and key headers always are)"),
    ]

    static func decode(_ mapping: ConfigMapping, site: ChainSite) -> RecordOptions? {
        let file = mapping.filePath("file", required: true)
        // No body over 1GB passes (limits.request_body, limits.response_body); a file past 1GB
        // is more than devtools, or replay, which reads a file whole, would load.
        let maxBody = mapping.size("max_body", default: 64 << 10, in: .init(0...(1 << 30))) ?? 64 << 10
        let maxFileSize = mapping.size("max_file_size", default: 50 << 20, in: .init((64 << 10)...(1 << 30))) ?? 50 << 20
        let keep = mapping.int("keep", default: 5, in: 0...1000) ?? 5
        let redact = mapping.stringList("redact_headers")
        if let file, !file.hasSuffix(".har") { mapping.error("file", "must end in .har (what devtools, Charles and Proxyman import)") }
        guard let file else { return nil }
        // What the chain's build would refuse (veneer run exits 78), told by veneer check too.
        if let problem = FileCheck.openProblem(file, folders: .all, reading: true) { mapping.error("file", "cannot open \(file): \(problem)") }
        return RecordOptions(file: file, maxBody: maxBody, maxFileSize: maxFileSize, keep: keep, redactHeaders: Set(redact.map { $0.lowercased() }))
    }
}
