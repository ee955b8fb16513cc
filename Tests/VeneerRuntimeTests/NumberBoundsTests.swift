import Foundation
import Testing
import VeneerConfig
import VeneerCore
@testable import VeneerRuntime

/// Every numeric key of the configuration at the edges of its bounds (README, "Bounds of
/// numbers"): 0, its minimum, its maximum, its maximum plus one, 2^63 seconds, negative,
/// fractional and with a huge exponent. Out of range is a `FILE:LINE:COL: error:` at the
/// value, never a trap (a trap would end this test process).
@Suite("Bounds of numbers: every numeric key of the configuration, at its edges")
struct NumberBoundsTests {
    /// Each key with the environment it is read in (`V` stands for the value).
    static let templates: [String: String] = {
        let har = FileManager.default.temporaryDirectory.appendingPathComponent("veneer-bounds-\(getpid())").path
        let auth = "token_url: http://127.0.0.1:9/token, client_id: c, client_secret: s, refresh_token: r"
        let mock = "origin: { mock: {} }"
        return [
            "limits.request_body": "\(mock)\n    limits: { request_body: V }",
            "limits.request_headers": "\(mock)\n    limits: { request_headers: V }",
            "limits.response_body": "\(mock)\n    limits: { response_body: V }",
            "limits.header_timeout": "\(mock)\n    limits: { header_timeout: V }",
            "limits.body_timeout": "\(mock)\n    limits: { body_timeout: V }",
            "limits.output_buffer": "\(mock)\n    limits: { output_buffer: V }",
            "limits.pipeline_depth": "\(mock)\n    limits: { pipeline_depth: V }",
            "limits.connections": "\(mock)\n    limits: { connections: V }",
            "limits.buffered": "\(mock)\n    limits: { buffered: V }",
            "limits.buffered_wait": "\(mock)\n    limits: { buffered_wait: V }",
            "limits.buffered_waiters": "\(mock)\n    limits: { buffered_waiters: V }",
            "drain_timeout": "\(mock)\n    drain_timeout: V",
            "idle_timeout": "\(mock)\n    idle_timeout: V",
            "mock.latency": "origin: { mock: { latency: V } }",
            "upstream.timeout": "origin: { upstream: { url: \"http://127.0.0.1:9\", timeout: V } }",
            "upstream.connect_timeout": "origin: { upstream: { url: \"http://127.0.0.1:9\", connect_timeout: V } }",
            "upstream.connections": "origin: { upstream: { url: \"http://127.0.0.1:9\", connections: V } }",
            "cache.ttl": "\(mock)\n    chain: [{ cache: { ttl: V } }]",
            "cache.ttl_override": "\(mock)\n    chain: [{ cache: { ttl_override: V } }]",
            "cache.heuristic_max": "\(mock)\n    chain: [{ cache: { ttl: heuristic, heuristic_max: V } }]",
            "cache.stale_if_error": "\(mock)\n    chain: [{ cache: { stale_if_error: V } }]",
            "cache.stale_while_revalidate": "\(mock)\n    chain: [{ cache: { stale_while_revalidate: V } }]",
            "cache.max_entries": "\(mock)\n    chain: [{ cache: { max_entries: V } }]",
            "cache.max_bytes": "\(mock)\n    chain: [{ cache: { max_entry_size: 0, max_bytes: V } }]",
            "cache.max_entry_size": "\(mock)\n    chain: [{ cache: { max_bytes: 1024GB, max_entry_size: V } }]",
            "cache.min_free": "\(mock)\n    chain: [{ cache: { min_free: V } }]",
            "auth_refresh.refresh_before_expiry": "\(mock)\n    chain: [{ auth_refresh: { \(auth), refresh_before_expiry: V } }]",
            "auth_refresh.timeout": "\(mock)\n    chain: [{ auth_refresh: { \(auth), refresh_wait: 1d, timeout: V } }]",
            "auth_refresh.refresh_wait": "\(mock)\n    chain: [{ auth_refresh: { \(auth), timeout: 1ms, refresh_wait: V } }]",
            "block_list.learn.status": "\(mock)\n    chain: [{ block_list: { learn: { status: V } } }]",
            "block_list.learn.block_for": "\(mock)\n    chain: [{ block_list: { learn: { status: 403, block_for: V } } }]",
            "latency_log.slow": "\(mock)\n    chain: [{ latency_log: { slow: V } }]",
            "record.max_body": "\(mock)\n    chain: [{ record: { file: \(har)/a.har, max_body: V } }]",
            "record.max_file_size": "\(mock)\n    chain: [{ record: { file: \(har)/a.har, max_file_size: V } }]",
            "record.keep": "\(mock)\n    chain: [{ record: { file: \(har)/a.har, keep: V } }]",
            "fault.abort.status": "\(mock)\n    chain: [{ fault: { abort: { status: V } } }]",
            "fault.abort.percent": "\(mock)\n    chain: [{ fault: { abort: { status: 503, percent: V } } }]",
            "fault.delay.duration": "\(mock)\n    chain: [{ fault: { delay: { duration: V } } }]",
            "fault.delay.percent": "\(mock)\n    chain: [{ fault: { delay: { duration: 1s, percent: V } } }]",
            "telemetry.queue": "\(mock)\n    telemetry: { endpoint: \"http://127.0.0.1:9/v1/traces\", queue: V }",
            "telemetry.timeout": "\(mock)\n    telemetry: { endpoint: \"http://127.0.0.1:9/v1/traces\", timeout: V }",
        ]
    }()

    /// A row of the README's table of bounds.
    struct Row: Sendable, CustomStringConvertible {
        let key: String
        let kind: String
        let minimum: String
        let maximum: String
        var description: String { key }
        var bounds: String { "\(minimum)...\(maximum)" }
    }

    /// The rows of the table under "### Bounds of numbers" in the README.
    static let rows: [Row] = {
        let readme = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../README.md").standardizedFileURL
        guard let text = try? String(contentsOf: readme, encoding: .utf8), let start = text.range(of: "### Bounds of numbers") else { return [] }
        var rows: [Row] = []
        var inTable = false
        for line in text[start.upperBound...].split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("| key |") { inTable = true; continue }
            guard inTable else { continue }
            guard line.hasPrefix("|") else { break }
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 5, cells[1].hasPrefix("`") else { continue }
            rows.append(Row(key: cells[1].trimmingCharacters(in: CharacterSet(charactersIn: "`")), kind: cells[2], minimum: cells[3], maximum: cells[4]))
        }
        return rows
    }()

    /// `environments.development.chain[0].cache.ttl` → `cache.ttl`; `origin.replay.upstream.timeout` → `upstream.timeout`.
    static func key(_ path: String) -> String {
        var parts = path.split(separator: ".").map(String.init).dropFirst(2)
        parts = parts.filter { !$0.hasPrefix("chain[") && $0 != "origin" && $0 != "replay" }[...]
        return parts.map { $0.split(separator: "[").first.map(String.init) ?? $0 }.joined(separator: ".")
    }

    static func check(_ template: String, value: String) -> (yaml: String, check: ConfigCheck, line: Int, column: Int) {
        let yaml = "environments:\n  development:\n    " + template.replacingOccurrences(of: "V", with: value) + "\n"
        let before = template.components(separatedBy: "V")[0]
        let prefix = "environments:\n  development:\n    " + before
        let lines = prefix.split(separator: "\n", omittingEmptySubsequences: false)
        let document = try! ConfigDocument(source: ConfigSource(file: "veneer.yaml", text: yaml))
        let check = document.check(only: "development", registry: .standard, variables: [:], workingDirectory: "/tmp")
        return (yaml, check, lines.count, (lines.last?.count ?? 0) + 1)
    }

    @Test("the README's table lists every numeric key the decoders read, and its bounds are the decoders' own")
    func tableIsComplete() throws {
        #expect(Self.rows.count >= 30, "the README's table of bounds is missing")
        #expect(Set(Self.rows.map(\.key)) == Set(Self.templates.keys))
        // Every option a factory documents as a duration, size or integer is in the table
        // (fault's seed is a seed, not a quantity: any 64-bit number).
        var documented: Set<String> = []
        for (name, factory) in Registry.standard.decorators {
            for option in factory.options where ["duration", "size", "integer"].contains(where: option.type.hasPrefix) {
                documented.insert("\(name).\(option.name)")
            }
        }
        for (name, factory) in Registry.standard.origins {
            for option in factory.options where ["duration", "size", "integer"].contains(where: option.type.hasPrefix) {
                documented.insert("\(name).\(option.name)")
            }
        }
        documented.remove("fault.seed")
        for key in documented.subtracting(["replay"]) {
            #expect(Self.templates[key.hasPrefix("replay.") ? String(key.dropFirst(7)) : key] != nil, "\(key) is not in the table of bounds")
        }
        // And the bounds each decoder applies are those the README states.
        for row in Self.rows {
            guard let template = Self.templates[row.key] else { continue }
            let read = Self.check(template, value: row.maximum).check.numbers
            let bounds = read.filter { Self.key($0.key) == row.key }.map(\.value)
            #expect(!bounds.isEmpty && bounds.allSatisfy { $0 == row.bounds }, "\(row.key): README \(row.bounds), decoder \(bounds)")
        }
    }

    /// The cases: the value written, and whether it is accepted.
    static func cases(_ row: Row) -> [(value: String, accepted: Bool)] {
        switch row.kind {
        case "duration":
            let minimum = Durations.read(Substring(row.minimum)), maximum = Durations.read(Substring(row.maximum))
            guard case .value(let low) = minimum, case .value(let high) = maximum else { return [] }
            let nanoseconds = high.components.seconds * 1_000_000_000 + high.components.attoseconds / 1_000_000_000
            return [("0", low == .zero), (row.minimum, true), (row.maximum, true), ("\(nanoseconds + 1)ns", false),
                    ("9223372036854775808s", false), ("9300000000s", false), ("155000000m", false), ("2600000h", false),
                    ("-1s", false), ("1.5s", low <= .milliseconds(1500) && .milliseconds(1500) <= high), ("1e400s", false),
                    ("soon", false)]
        case "size":
            guard case .value(let low) = Sizes.read(Substring(row.minimum)), case .value(let high) = Sizes.read(Substring(row.maximum)) else { return [] }
            return [("0", low == 0), (row.minimum, true), (row.maximum, true), ("\(high + 1)", false), ("9223372036854775808", false),
                    ("-1", false), ("1.5KB", low <= 1536 && 1536 <= high), ("1e400", false), ("lots", false)]
        case "count":
            guard let low = Int(row.minimum), let high = Int(row.maximum) else { return [] }
            return [("0", low == 0), (row.minimum, true), (row.maximum, true), ("\(high + 1)", false), ("9223372036854775808", false),
                    ("-1", false), ("1.5", false), ("1e400", false)]
        default:
            return [("0", true), ("100", true), ("100.5", false), ("101", false), ("9223372036854775808", false), ("-1", false),
                    ("12.5", true), ("12.5%", true), ("1e400", false)]
        }
    }

    @Test("each key: 0, minimum, maximum, maximum + 1, 2^63 seconds, negative, fractional, a huge exponent", arguments: rows)
    func edges(_ row: Row) throws {
        let template = try #require(Self.templates[row.key])
        let cases = Self.cases(row)
        #expect(cases.count >= 8, "\(row.key): bounds \(row.bounds) do not read as a \(row.kind)")
        for (value, accepted) in cases {
            let (yaml, check, line, column) = Self.check(template, value: value)
            let here = check.errors.filter { Self.key($0.path) == row.key }
            if accepted {
                #expect(here.isEmpty && check.errors.isEmpty, "\(row.key): \(value) is refused: \(check.errors)\n\(yaml)")
            } else {
                #expect(here.count == 1, "\(row.key): \(value) is not refused once: \(check.errors)")
                let text = here.first.map { "\($0.mark.map { "\($0.file):\($0.line):\($0.column)" } ?? "") \($0.message)" } ?? ""
                #expect(text.hasPrefix("veneer.yaml:\(line):\(column) "), "\(row.key): \(value): \(text)\n\(yaml)")
            }
        }
    }
}
