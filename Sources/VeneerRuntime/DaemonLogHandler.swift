import Foundation
import Logging
import VeneerCore

#if canImport(Glibc)
@preconcurrency import Glibc
#endif

/// How `veneer run` writes its own log lines (`--log-format`).
public enum LogFormat: String, Sendable, CaseIterable {
    /// `TIME LEVEL LABEL: key=value ... [SOURCE] MESSAGE`, as swift-log's stream handler.
    case text
    /// One JSON object per line: `time`, `level`, `label`, `message`, `source`, then the metadata.
    case json
}

/// The daemon's log handler: one line per message on standard error, written with one
/// `write(2)` (never interleaved, never waiting in a buffer), as text or JSON.
///
/// Under systemd, when `JOURNAL_STREAM` names standard error, each line starts with its
/// syslog priority (`<3>` for errors ...), which journald turns into the entry's priority:
/// `journalctl -p err` then shows reload failures and `invalid_grant`, and the rest is not
/// all logged at `info`.
public struct DaemonLogHandler: LogHandler {
    /// The logger's label (`veneer.runtime` ...).
    public let label: String
    /// Text or JSON.
    public let format: LogFormat
    /// Whether lines start with `<PRIORITY>` for journald.
    public let journal: Bool
    /// Where a whole line goes.
    let write: @Sendable ([UInt8]) -> Void

    /// Messages below this level are dropped.
    public var logLevel: Logger.Level = .info
    /// Metadata every line of this logger carries.
    public var metadata: Logger.Metadata = [:]

    /// A handler writing to standard error.
    public init(label: String, format: LogFormat, journal: Bool) {
        self.init(label: label, format: format, journal: journal) { line in
            _ = line.withUnsafeBytes { FileDescriptorWriter.writeAll(2, $0) }
        }
    }

    /// A handler writing each line to `write` (tests).
    public init(label: String, format: LogFormat, journal: Bool, write: @escaping @Sendable ([UInt8]) -> Void) {
        self.label = label
        self.format = format
        self.journal = journal
        self.write = write
    }

    /// The metadata value of `key`.
    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// Writes one line.
    public func log(event: LogEvent) {
        var merged = metadata
        if let explicit = event.metadata { merged.merge(explicit) { $1 } }
        write(Array(Self.line(event, label: label, metadata: merged, format: format, journal: journal, time: Date()).utf8))
    }

    /// The whole line (with its newline).
    static func line(_ event: LogEvent, label: String, metadata: Logger.Metadata, format: LogFormat, journal: Bool, time: Date) -> String {
        var line = journal ? "<\(priority(event.level))>" : ""
        switch format {
        case .text:
            let pretty = metadata.sorted { $0.key < $1.key }.map { " \($0.key)=\($0.value)" }.joined()
            line += "\(textTime(time)) \(event.level) \(label):\(pretty) [\(event.source)] \(event.message)\n"
        case .json:
            var members: [(String, JSONValue)] = [
                ("time", .string(Timestamp.iso8601(time))), ("level", .string(event.level.rawValue)), ("label", .string(label)),
                ("message", .string(event.message.description)), ("source", .string(event.source)),
            ]
            for (key, value) in metadata.sorted(by: { $0.key < $1.key }) where !["time", "level", "label", "message", "source"].contains(key) {
                members.append((key, json(value)))
            }
            line += JSONValue.object(members).text + "\n"
        }
        return line
    }

    /// The syslog priority journald reads from a `<N>` prefix (sd-daemon(3)).
    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: return 7
        case .info: return 6
        case .notice: return 5
        case .warning: return 4
        case .error: return 3
        case .critical: return 2
        }
    }

    static func json(_ value: Logger.Metadata.Value) -> JSONValue {
        switch value {
        case .string(let text): return .string(text)
        case .stringConvertible(let value): return .string(value.description)
        case .array(let values): return .array(values.map(json))
        case .dictionary(let members): return .object(members.sorted { $0.key < $1.key }.map { ($0.key, json($0.value)) })
        }
    }

    /// Local time as swift-log's stream handler writes it: `2026-11-23T22:51:07+0000`.
    static func textTime(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var local = tm()
        localtime_r(&seconds, &local)
        var buffer = [Int8](repeating: 0, count: 64)
        let count = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%S%z", &local)
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Whether standard error is the journal: `JOURNAL_STREAM` (`DEVICE:INODE`, set by
    /// systemd for a service whose output goes to the journal) names the file descriptor 2
    /// has (systemd.exec(5)), so a child whose stderr was redirected does not prefix.
    public static func standardErrorIsJournal(variables: [String: String]) -> Bool {
        guard let value = variables["JOURNAL_STREAM"] else { return false }
        let parts = value.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var status = stat()
        guard fstat(2, &status) == 0 else { return false }
        return UInt64(status.st_dev) == device && UInt64(status.st_ino) == inode
    }
}
