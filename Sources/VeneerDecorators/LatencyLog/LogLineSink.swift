import Foundation
import NIOCore
import Synchronization
import VeneerCore

#if canImport(Glibc)
@preconcurrency import Glibc
#endif

/// Where log lines go. Each write is one whole line, written at once (no interleaving).
public protocol LogLineSink: Sendable {
    /// Writes one line (which ends with a newline).
    func write(_ line: ByteBuffer)
}

/// Standard output, written with one `write(2)` per line so that nothing waits in a buffer
/// when stdout is a pipe or the journal.
public final class StandardOutputSink: LogLineSink {
    /// The process's standard output.
    public static let shared = StandardOutputSink()
    private let lock = Mutex(())

    private init() {}

    /// Writes the line to file descriptor 1.
    public func write(_ line: ByteBuffer) {
        lock.withLock { _ in
            line.withUnsafeReadableBytes { bytes in FileDescriptorWriter.writeAll(1, bytes) }
        }
    }
}

/// A file opened for appending (0640), reopened when the chain is rebuilt (SIGHUP), so that
/// log rotation works as with nginx: move the file, send SIGHUP.
public final class AppendingFileSink: LogLineSink {
    /// The file.
    public let path: String
    private let descriptor = Mutex<Int32>(-1)

    /// Opens `path` for appending, creating it (and its directory) when missing.
    public init(path: String) throws {
        self.path = path
        try reopen()
    }

    /// Closes the file and opens `path` again.
    public func reopen() throws {
        let directory = (path as NSString).deletingLastPathComponent
        if !directory.isEmpty {
            try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
        let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o640)
        guard fd >= 0 else {
            throw LogFileError(path: path, reason: String(cString: strerror(errno)))
        }
        let old = descriptor.withLock { current in
            defer { current = fd }
            return current
        }
        if old >= 0 { close(old) }
    }

    /// Appends the line.
    public func write(_ line: ByteBuffer) {
        descriptor.withLock { fd in
            guard fd >= 0 else { return }
            line.withUnsafeReadableBytes { bytes in FileDescriptorWriter.writeAll(fd, bytes) }
        }
    }

    deinit {
        let fd = descriptor.withLock { $0 }
        if fd >= 0 { close(fd) }
    }
}

/// A log file that cannot be opened.
public struct LogFileError: Error, CustomStringConvertible {
    /// The file.
    public let path: String
    /// The system's reason.
    public let reason: String
    /// `cannot open log file PATH: reason`.
    public var description: String { "cannot open log file \(path): \(reason)" }
}
