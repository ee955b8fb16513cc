import Foundation

/// A real OTLP/HTTP trace collector for the tests (`Tests/otlp/otlp_receiver.py`): it decodes
/// what it receives with OpenTelemetry's own protobuf definitions (Python's
/// `opentelemetry-proto`, in `.build/otlp-venv`: `make test-deps`), and writes one JSON object
/// per span, which ``spans`` reads back. With `hang`, it accepts connections and never answers.
public final class OTLPReceiver: Sendable {
    /// One span as the receiver decoded it.
    public struct Span: Sendable {
        /// The decoded object (`trace_id`, `span_id`, `parent_span_id`, `name`, `kind`,
        /// `attributes`, `status_code`, `status_message`, `resource`, ...).
        public let fields: [String: any Sendable]
        /// Hex trace id.
        public var traceID: String { fields["trace_id"] as? String ?? "" }
        /// Hex span id.
        public var spanID: String { fields["span_id"] as? String ?? "" }
        /// Hex parent span id (empty for a root).
        public var parentSpanID: String { fields["parent_span_id"] as? String ?? "" }
        /// The span's name.
        public var name: String { fields["name"] as? String ?? "" }
        /// OTLP's kind number (1 internal, 2 server, 3 client).
        public var kind: Int { fields["kind"] as? Int ?? 0 }
        /// An attribute's value.
        public func attribute(_ key: String) -> (any Sendable)? { (fields["attributes"] as? [String: any Sendable])?[key] }
        /// The status code (0 unset, 2 error).
        public var statusCode: Int { fields["status_code"] as? Int ?? 0 }
    }

    /// The package's folder.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    /// The Python of the virtual environment `make test-deps` made. Not a standardized URL:
    /// that resolves the symbolic link, and a Python started by its real path does not see
    /// its virtual environment.
    public static let python = root + "/.build/otlp-venv/bin/python"

    /// Whether the receiver can run here (`make test-deps` installed it).
    public static var isAvailable: Bool { FileManager.default.isExecutableFile(atPath: python) }

    let process: ChildProcess
    let file: String
    /// The port it listens on.
    public let port: Int

    /// The URL Veneer posts spans to.
    public var url: String { "http://127.0.0.1:\(port)/v1/traces" }

    private init(process: ChildProcess, file: String, port: Int) {
        self.process = process
        self.file = file
        self.port = port
    }

    /// Starts a receiver (one that never answers with `hang`).
    public static func start(hang: Bool = false) async throws -> OTLPReceiver {
        guard isAvailable else { throw ReceiverFailed(output: "\(python) is missing") }
        let script = root + "/Tests/otlp/otlp_receiver.py"
        let file = try temporaryDirectory("veneer-otlp") + "/spans.jsonl"
        let process = try ChildProcess(python, [script, file] + (hang ? ["--hang"] : []), output: .pipe, error: .pipe)
        var port: Int?
        _ = try await poll(timeout: eventuallyTimeout) {
            port = process.standardOutput?.text.split(separator: "\n").first.flatMap { Int($0) }
            return port != nil || !process.isRunning
        }
        guard let port else {
            process.signal(SIGKILL)
            throw ReceiverFailed(output: process.standardError?.text ?? "")
        }
        return OTLPReceiver(process: process, file: file, port: port)
    }

    /// Every span received so far.
    public var spans: [Span] {
        ((try? String(contentsOfFile: file, encoding: .utf8)) ?? "").split(separator: "\n").compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return nil }
            return Span(fields: Self.sendable(object))
        }
    }

    private static func sendable(_ object: [String: Any]) -> [String: any Sendable] {
        object.mapValues { value -> any Sendable in
            switch value {
            case let nested as [String: Any]: return sendable(nested)
            case let number as NSNumber:
                // JSON true and false come back as 1 and 0.
                return number.doubleValue == number.doubleValue.rounded() ? number.intValue : number.doubleValue
            case let text as String: return text
            default: return String(describing: value)
            }
        }
    }

    /// The receiver did not start (is `make test-deps` done?).
    public struct ReceiverFailed: Error, CustomStringConvertible {
        /// What it printed.
        public let output: String
        /// Why.
        public var description: String { "the OTLP receiver did not start (run make test-deps): \(output)" }
    }

    /// Stops it.
    public func stop() {
        process.signal(SIGKILL)
        try? FileManager.default.removeItem(atPath: (file as NSString).deletingLastPathComponent)
    }
}
