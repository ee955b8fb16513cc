import Foundation
import Synchronization

/// The `veneer` binary run as a real process, as operators and systemd run it.
public final class VeneerProcess: Sendable {
    /// The process.
    public let process: Process
    private let output: OutputCollector
    private let errors: OutputCollector

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

    /// Starts `veneer ARGS` (or `executable ARGS`).
    public init(_ arguments: [String], directory: String? = nil, environment: [String: String] = [:], executable: String = VeneerProcess.binary) throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        var variables = ProcessInfo.processInfo.environment
        for key in ["VENEER_CONFIG", "VENEER_ENV", "NOTIFY_SOCKET", "WATCHDOG_USEC", "LISTEN_FDS", "LISTEN_PID", "INVOCATION_ID", "SYSTEMD_EXEC_PID"] { variables[key] = nil }
        variables.merge(environment) { $1 }
        process.environment = variables
        let outPipe = Pipe(), errPipe = Pipe()
        process.standardOutput = outPipe
        process.standardError = errPipe
        process.standardInput = FileHandle.nullDevice
        output = OutputCollector(outPipe)
        errors = OutputCollector(errPipe)
        try process.run()
    }

    /// Everything written to stdout so far.
    public var stdout: String { output.text }
    /// Everything written to stderr so far.
    public var stderr: String { errors.text }

    /// Waits until stderr says the listener is ready, and returns its port.
    public func waitUntilReady(timeout: Duration = .seconds(20)) async throws -> Int {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let range = stderr.range(of: #"port=(\d+) \[veneer\] veneer ready"#, options: .regularExpression) {
                let match = stderr[range]
                let digits = match.dropFirst(5).prefix { $0.isNumber }
                return Int(digits)!
            }
            if !process.isRunning {
                throw ProcessError.exited(process.terminationStatus, stderr)
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw ProcessError.notReady(stderr)
    }

    /// Sends a signal.
    public func signal(_ signal: Int32) {
        kill(process.processIdentifier, signal)
    }

    /// Waits for the process to exit and returns its status.
    public func wait(timeout: Duration = .seconds(30)) async -> Int32 {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        if process.isRunning {
            process.interrupt()
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        // Let the pipes drain.
        try? await Task.sleep(for: .milliseconds(50))
        return process.terminationStatus
    }

    /// Kills the process if it still runs.
    public func terminate() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
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

final class OutputCollector: Sendable {
    private let data = Mutex<Data>(Data())

    init(_ pipe: Pipe) {
        pipe.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let chunk = handle.availableData
            if chunk.isEmpty {
                handle.readabilityHandler = nil
                return
            }
            self?.data.withLock { $0.append(chunk) }
        }
    }

    var text: String { String(decoding: data.withLock { $0 }, as: UTF8.self) }
}

/// A fresh temporary directory, removed by the caller.
public func temporaryDirectory(_ prefix: String = "veneer-test") throws -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}
