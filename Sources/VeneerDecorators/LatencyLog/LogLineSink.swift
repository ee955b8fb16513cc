import CoreMetrics
import Dispatch
import Foundation
import Logging
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
    /// Writes one line (which ends with a newline) that the caller owns only for this call:
    /// a sink that keeps it copies it.
    func write(bytes line: UnsafeRawBufferPointer)
}

extension LogLineSink {
    /// The line copied into a buffer of its own, for ``write(_:)``.
    public func write(bytes line: UnsafeRawBufferPointer) {
        var buffer = ByteBufferAllocator().buffer(capacity: line.count)
        buffer.writeBytes(line)
        write(buffer)
    }
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
        line.withUnsafeReadableBytes { write(bytes: $0) }
    }

    /// Writes the line to file descriptor 1.
    public func write(bytes line: UnsafeRawBufferPointer) {
        lock.withLock { _ in
            _ = FileDescriptorWriter.writeAll(1, line)
        }
    }
}

/// A file opened for appending (0640), reopened when the chain is rebuilt (SIGHUP), so that
/// log rotation works as with nginx: move the file, send SIGHUP.
///
/// The event loops only copy each line into a queue (a lock held for the copy, no system
/// call but a wake-up when the queue was empty); a thread of its own writes the queue in
/// batches, as the access log does, so that a slow disk never stalls a loop and a line costs
/// no `write(2)` of its own. Lines keep their order, and each is written whole. The queue holds
/// at most ``maxQueuedBytes``: a line that does not fit is dropped and counted
/// (``droppedLines``, and `veneer_latency_log_dropped_lines_total`) rather than held or waited
/// for. ``close()`` (Veneer stopping, or no chain writing here any more) writes what is queued
/// first; a crash loses what was queued, at most ``gatherInterval`` of lines when the disk keeps up.
public final class AppendingFileSink: LogLineSink, CarriedResource {
    /// The file.
    public let path: String
    /// How many bytes of lines may wait for the writer before new lines are dropped (4 MiB:
    /// about 16,000 lines of 250 bytes).
    public static let maxQueuedBytes = 4 << 20
    /// How long the writer lets lines gather once one arrives (10 ms): a line waits this long at most
    /// while the disk keeps up.
    public static let gatherInterval: Duration = .milliseconds(10)
    private let writer: BatchedLineWriter
    private let dropCounter: Counter?
    private let logger: Logger?

    /// Opens `path` for appending, creating it (and its directory) when missing, and starts
    /// the writer thread; a line that finds `maxQueuedBytes` waiting is dropped and counted in `dropped`;
    /// `logger` hears of a close that could not wait for the writer.
    public init(path: String, maxQueuedBytes: Int = AppendingFileSink.maxQueuedBytes, dropped: Counter? = nil, logger: Logger? = nil) throws {
        self.path = path
        dropCounter = dropped
        self.logger = logger
        writer = BatchedLineWriter(descriptor: try Self.open(path), maxQueuedBytes: maxQueuedBytes,
                                   gather: UInt32(Self.gatherInterval / .microseconds(1)), lost: dropped)
        Thread.detachNewThread { [writer] in writer.run() }
    }

    /// Opens `path` again: lines queued before go to the file opened before (then closed),
    /// lines queued after to the new one. A file that cannot be opened keeps the old one (and throws).
    public func reopen() throws {
        writer.switchTo(try Self.open(path))
    }

    /// Queues the line; never waits for the disk.
    public func write(_ line: ByteBuffer) {
        line.withUnsafeReadableBytes { write(bytes: $0) }
    }

    /// Queues a copy of the line; never waits for the disk.
    public func write(bytes line: UnsafeRawBufferPointer) {
        if !writer.append(line) { dropCounter?.increment() }
    }

    /// Lines dropped because the writer fell behind by ``maxQueuedBytes`` (or came after
    /// ``close()``), or lost by a write that failed (a full disk, an I/O error).
    public var droppedLines: Int { writer.droppedLines }

    /// How long ``close()`` waits for the writer to write what is queued (a disk or a FIFO that
    /// takes nothing must not hold up Veneer's stop).
    public static let closeWait: Duration = .seconds(5)

    /// Writes what is queued, stops the writer and closes the file; later lines are dropped.
    /// Waits at most ``closeWait``: a writer stuck in a write is left to finish on its own,
    /// and the log says so.
    public func close() async {
        writer.stop()
        let stopped = writer.stopped
        let ended = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await stopped.wait()
                return true
            }
            group.addTask {
                try? await Task.sleep(for: Self.closeWait)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        if !ended {
            logger?.warning("latency_log: the file's writer did not finish within \(Self.closeWait); its queued lines may be lost",
                                            metadata: ["file": .string(path)])
        }
    }

    deinit {
        // The writer thread writes what is queued, closes the file and ends.
        writer.stop()
    }

    private static func open(_ path: String) throws -> Int32 {
        let directory = (path as NSString).deletingLastPathComponent
        if !directory.isEmpty {
            try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
        let fd = Glibc.open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o640)
        guard fd >= 0 else {
            throw LogFileError(path: path, reason: String(cString: strerror(errno)))
        }
        return fd
    }
}

/// The queue of ``AppendingFileSink`` and its writer thread's loop (``run()``), apart from the
/// sink so that the thread does not keep the sink alive: the sink's end stops it.
final class BatchedLineWriter: Sendable {
    private struct Queue {
        var bytes = ByteBuffer()
        /// Files opened by a reopen, each with the queue's length when it was asked for.
        var switches: [(at: Int, descriptor: Int32)] = []
        var stopping = false
        var dropped = 0
    }
    private let queue = Mutex(Queue())
    private let wake = DispatchSemaphore(value: 0)
    private let maxQueuedBytes: Int
    private let gather: UInt32
    /// The file written to, owned by the writer thread from ``run()`` on.
    private let first: Int32
    /// Open once the writer has written everything and closed its file.
    let stopped = Latch()
    /// Counts the lines a failed write lost (a full disk, an I/O error, a FIFO's reader gone).
    private let lost: Counter?

    init(descriptor: Int32, maxQueuedBytes: Int, gather: UInt32, lost: Counter? = nil) {
        first = descriptor
        self.maxQueuedBytes = maxQueuedBytes
        self.gather = gather
        self.lost = lost
    }

    /// Queues `line` whole, or drops it (false) when it does not fit or the writer stopped.
    func append(_ line: UnsafeRawBufferPointer) -> Bool {
        let wasEmpty = queue.withLock { queue -> Bool? in
            guard !queue.stopping, queue.bytes.readableBytes + line.count <= maxQueuedBytes else {
                queue.dropped += 1
                return nil
            }
            let wasEmpty = queue.bytes.readableBytes == 0
            queue.bytes.writeBytes(line)
            return wasEmpty
        }
        if wasEmpty == true { wake.signal() }
        return wasEmpty != nil
    }

    /// Lines queued from now on go to `descriptor`.
    func switchTo(_ descriptor: Int32) {
        let accepted = queue.withLock { queue in
            guard !queue.stopping else { return false }
            queue.switches.append((queue.bytes.readableBytes, descriptor))
            return true
        }
        if accepted { wake.signal() } else { close(descriptor) }
    }

    var droppedLines: Int { queue.withLock { $0.dropped } }

    /// Asks the writer to write what is queued and end.
    func stop() {
        queue.withLock { $0.stopping = true }
        wake.signal()
    }

    /// The writer thread: one batch per wake-up, until stopped.
    func run() {
        var descriptor = first
        var batch = ByteBuffer()
        while true {
            wake.wait()
            if !queue.withLock({ $0.stopping }) { usleep(gather) }
            // A line queued after this swap finds the queue empty and signals again.
            let (switches, stopping) = queue.withLock { queue in
                swap(&batch, &queue.bytes)
                defer { queue.switches.removeAll() }
                return (queue.switches, queue.stopping)
            }
            var written = 0
            var failed = 0
            for (at, next) in switches {
                failed += Self.write(descriptor, batch, from: written, to: at)
                close(descriptor)
                descriptor = next
                written = at
            }
            failed += Self.write(descriptor, batch, from: written, to: batch.readableBytes)
            if failed > 0 {
                queue.withLock { $0.dropped += failed }
                lost?.increment(by: Int64(failed))
            }
            // Keeps its capacity: the next swap hands it to the loops.
            batch.clear()
            if stopping {
                close(descriptor)
                stopped.open()
                return
            }
        }
    }

    /// Writes the lines from `from` to `to`; returns how many a failed write lost (a line
    /// written in part counts as lost).
    private static func write(_ descriptor: Int32, _ batch: ByteBuffer, from: Int, to: Int) -> Int {
        guard to > from else { return 0 }
        return batch.withUnsafeReadableBytes { bytes in
            let lines = UnsafeRawBufferPointer(rebasing: bytes[from..<to])
            // In pieces cut at line ends: the file may be a pipe shared with other writers.
            let written = FileDescriptorWriter.writeLines(descriptor, lines)
            guard written < lines.count else { return 0 }
            var lost = lines[written...].count(where: { $0 == UInt8(ascii: "\n") })
            if written > 0, lines[written - 1] != UInt8(ascii: "\n") { lost += 0 }  // the torn line's end is in what is counted
            return lost
        }
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
