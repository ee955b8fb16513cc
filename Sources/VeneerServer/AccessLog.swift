import CoreMetrics
import Dispatch
import NIOCore
import NIOPosix
import Synchronization
import VeneerCore

#if canImport(Glibc)
@preconcurrency import Glibc
#endif

/// The access log of an environment: one JSON line per request the listeners answered,
/// refusals included (``AccessLogEntry``).
///
/// The event loops only queue the facts of each request (``append(_:)``: a lock held for an
/// array append, no formatting, no system call but a wake-up when the queue was empty); a
/// thread of its own formats the lines and writes them in batches, so that a slow disk or a
/// full pipe never stalls a loop. When the writer falls behind by ``maxQueued`` lines, lines
/// are dropped and counted (``droppedLines``) instead of holding memory or blocking.
public final class AccessLog: Sendable {
    /// Where the lines go.
    public enum Output: Sendable, Equatable {
        /// File descriptor 1 (the journal under systemd).
        case standardOutput
        /// A file appended to (created 0640 with its directory), reopened by ``reopen()``.
        case file(String)
    }

    /// How many lines may wait for the writer before new ones are dropped.
    public static let maxQueued = 65_536
    /// How long the writer lets lines gather once one arrives: under load the loops wake it
    /// (and it writes) about once per interval instead of once per request, which cost more
    /// than the line itself. A line waits this long at most.
    static let gatherInterval: UInt32 = 10_000  // microseconds

    private struct Queue {
        var entries: [AccessLogEntry] = []
        /// Asked to reopen when this many lines were queued: they go to the old file, later ones to the new.
        var reopenAt: Int?
        var stopping = false
        var dropped = 0
    }

    /// Where the lines go.
    public let output: Output
    /// Whether each line carries the request's ``RequestRecord/entries`` (`"trace"`): at debug level.
    public let writesTrace: Bool
    private let queue = Mutex(Queue())
    private let wake = DispatchSemaphore(value: 0)
    private let descriptor = Atomic<Int32>(-1)
    private let pool = NIOThreadPool(numberOfThreads: 1)
    private let stopped = Latch()
    private let started = Atomic<Bool>(false)
    private let dropCounter: Counter?

    /// Opens `output` (a file is opened now, so that a path that cannot be written is an
    /// error at start); ``start()`` starts the writer. Dropped lines are counted in `dropped` too.
    /// With `trace`, each line says what every decorator did (see ``writesTrace``).
    public init(output: Output, dropped: Counter? = nil, trace: Bool = false) throws(AccessLogError) {
        self.output = output
        writesTrace = trace
        dropCounter = dropped
        switch output {
        case .standardOutput:
            descriptor.store(1, ordering: .relaxed)
        case .file(let path):
            descriptor.store(try Self.open(path), ordering: .relaxed)
        }
    }

    /// Starts the writer thread (once).
    public func start() {
        guard !started.exchange(true, ordering: .relaxed) else { return }
        pool.start()
        pool.submit { [self] _ in
            writeUntilStopped()
            stopped.open()
        }
    }

    /// Queues one request's line. Called on an event loop: never blocks on the writer.
    public func append(_ entry: AccessLogEntry) {
        let wasEmpty = queue.withLock { queue -> Bool? in
            guard queue.entries.count < Self.maxQueued, !queue.stopping else {
                queue.dropped += 1
                return nil
            }
            queue.entries.append(entry)
            return queue.entries.count == 1
        }
        switch wasEmpty {
        case true?: wake.signal()
        case false?: break
        case nil: dropCounter?.increment()
        }
    }

    /// Asks the writer to reopen the file (after log rotation moved it: SIGHUP); lines
    /// queued before are written to the old file, lines queued after to the new one.
    public func reopen() {
        guard case .file = output else { return }
        queue.withLock { $0.reopenAt = $0.reopenAt ?? $0.entries.count }
        wake.signal()
    }

    /// Lines dropped because the writer fell behind (or came after ``close()``).
    public var droppedLines: Int { queue.withLock { $0.dropped } }

    /// Writes what is queued, stops the writer and closes the file.
    public func close() async {
        queue.withLock { $0.stopping = true }
        wake.signal()
        if started.load(ordering: .relaxed) {
            await stopped.wait()
            try? await pool.shutdownGracefully()
        }
        let fd = descriptor.exchange(-1, ordering: .relaxed)
        if case .file = output, fd >= 0 { Glibc.close(fd) }
    }

    deinit {
        // Never started (an instance that did not run): only the file to close.
        let fd = descriptor.load(ordering: .relaxed)
        if case .file = output, fd >= 0 { Glibc.close(fd) }
    }

    // MARK: The writer thread

    private func writeUntilStopped() {
        var batch: [AccessLogEntry] = []
        var out = ByteBuffer()
        var line = ByteBuffer()
        while true {
            wake.wait()
            if !queue.withLock({ $0.stopping }) { usleep(Self.gatherInterval) }
            // One pass per wake-up: a line queued after this swap finds the queue empty and
            // signals again.
            let (reopenAt, stopping) = queue.withLock { queue in
                swap(&batch, &queue.entries)
                defer { queue.reopenAt = nil }
                return (queue.reopenAt, queue.stopping)
            }
            if let reopenAt, case .file(let path) = output {
                write(batch[..<reopenAt], out: &out, line: &line)
                // A file that cannot be opened again keeps the old one: no line is lost.
                if let fd = try? Self.open(path) {
                    let old = descriptor.exchange(fd, ordering: .relaxed)
                    if old >= 0 { Glibc.close(old) }
                }
                write(batch[reopenAt...], out: &out, line: &line)
            } else {
                write(batch[...], out: &out, line: &line)
            }
            batch.removeAll(keepingCapacity: true)
            // Stopping: lines that come later are refused (and counted), so this was the last.
            if stopping { return }
        }
    }

    /// Formats `entries` and writes them in pieces of at most `PIPE_BUF` bytes cut at line
    /// ends, so that lines sharing standard output with other writers never interleave.
    private func write(_ entries: ArraySlice<AccessLogEntry>, out: inout ByteBuffer, line: inout ByteBuffer) {
        guard !entries.isEmpty else { return }
        let fd = descriptor.load(ordering: .relaxed)
        for entry in entries {
            line.clear()
            entry.writeJSON(into: &line, trace: writesTrace)
            if out.readableBytes + line.readableBytes > Int(PIPE_BUF), out.readableBytes > 0 {
                Self.writeAll(fd, out)
                out.clear()
            }
            out.writeImmutableBuffer(line)
        }
        Self.writeAll(fd, out)
        out.clear()
    }

    private static func writeAll(_ fd: Int32, _ buffer: ByteBuffer) {
        guard fd >= 0 else { return }
        _ = buffer.withUnsafeReadableBytes { FileDescriptorWriter.writeAll(fd, $0) }
    }

    private static func open(_ path: String) throws(AccessLogError) -> Int32 {
        if let slash = path.lastIndex(of: "/"), slash != path.startIndex {
            mkdir(String(path[..<slash]), 0o750)
        }
        let fd = Glibc.open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o640)
        guard fd >= 0 else { throw AccessLogError(path: path, reason: String(cString: strerror(errno))) }
        return fd
    }
}

/// An access log file that cannot be opened.
public struct AccessLogError: Error, CustomStringConvertible {
    /// The file.
    public let path: String
    /// The system's reason.
    public let reason: String
    /// `cannot open the access log PATH: reason`.
    public var description: String { "cannot open the access log \(path): \(reason)" }
}
