import Foundation
import Synchronization

/// The `veneer` binary run as a real process, as operators and systemd run it.
public final class VeneerProcess: Sendable {
    /// The process.
    public let process: ChildProcess
    private let output: ChildProcess.Output
    private let errors: ChildProcess.Output

    /// Where the binary is: `$VENEER_BINARY`, else `.build/debug/veneer` of this package.
    public static var binary: String {
        if let explicit = ProcessInfo.processInfo.environment["VENEER_BINARY"] { return explicit }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/veneer").path
    }

    /// Runs `veneer ARGS` to completion and returns its exit status, stdout and stderr.
    public static func run(_ arguments: [String], directory: String? = nil, environment: [String: String] = [:]) async throws -> (status: Int32, stdout: String, stderr: String) {
        let process = try VeneerProcess(arguments, directory: directory, environment: environment)
        let status = await process.wait()
        return (status, process.stdout, process.stderr)
    }

    /// Runs another program to completion (a browser, a packaging tool) and returns its exit
    /// status, stdout and stderr.
    public static func runProgram(_ path: String, _ arguments: [String], directory: String? = nil) async throws -> (status: Int32, stdout: String, stderr: String) {
        let process = try VeneerProcess(arguments, directory: directory, executable: path)
        let status = await process.wait()
        return (status, process.stdout, process.stderr)
    }

    /// Starts `veneer ARGS` (or `executable ARGS`), with `passing` as its descriptors 3, 4, ….
    public init(_ arguments: [String], directory: String? = nil, environment: [String: String] = [:], executable: String = VeneerProcess.binary,
                passing: [Int32] = []) throws {
        var variables = ProcessInfo.processInfo.environment
        for key in ["VENEER_CONFIG", "VENEER_ENV", "NOTIFY_SOCKET", "WATCHDOG_USEC", "LISTEN_FDS", "LISTEN_PID", "INVOCATION_ID", "SYSTEMD_EXEC_PID"] { variables[key] = nil }
        variables.merge(environment) { $1 }
        process = try ChildProcess(executable, arguments, directory: directory, environment: variables, output: .pipe, error: .pipe, passing: passing)
        output = process.standardOutput!
        errors = process.standardError!
    }

    /// Everything written to stdout so far.
    public var stdout: String { output.text }
    /// Everything written to stderr so far.
    public var stderr: String { errors.text }

    /// Waits until stderr says the listener is ready, and returns its port; throws at once when
    /// the process exits first, and after `timeout` (a debug build starting beside a whole
    /// parallel test run can take seconds).
    public func waitUntilReady(timeout: Duration = eventuallyTimeout) async throws -> Int {
        var port: Int?
        let ready = try await poll(timeout: timeout) {
            let said = stderr
            if let range = said.range(of: #"port=(\d+) \[veneer\] veneer ready"#, options: .regularExpression) {
                port = Int(said[range].dropFirst(5).prefix { $0.isNumber })
                return true
            }
            if !process.isRunning { throw ProcessError.exited(process.terminationStatus, stderr) }
            return false
        }
        guard ready, let port else { throw ProcessError.notReady(stderr) }
        return port
    }

    /// Sends a signal.
    public func signal(_ signal: Int32) {
        process.signal(signal)
    }

    /// Waits for the process to exit (killing it after `timeout`) and for what it wrote to be
    /// read to the end, and returns its status.
    public func wait(timeout: Duration = eventuallyTimeout) async -> Int32 {
        let status = await process.waitUntilExit(timeout: timeout)
        // Its pipes end once every process holding them (children included) is gone.
        _ = try? await poll(timeout: .seconds(5)) { output.isFinished && errors.isFinished }
        return status
    }

    /// Kills the process if it still runs.
    public func terminate() {
        process.signal(SIGKILL)
    }
}

/// Why a process did not become ready.
public enum ProcessError: Error, CustomStringConvertible {
    case exited(Int32, String)
    case notReady(String)
    public var description: String {
        switch self {
        case .exited(let status, let stderr): return "veneer exited with \(status):\n\(stderr)"
        case .notReady(let stderr): return "veneer did not become ready:\n\(stderr)"
        }
    }
}

/// A fresh temporary directory, removed by the caller.
public func temporaryDirectory(_ prefix: String = "veneer-test") throws -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}
