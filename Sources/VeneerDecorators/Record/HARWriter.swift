import Foundation
import NIOCore
import Synchronization

#if canImport(Glibc)
@preconcurrency import Glibc
#endif

/// A HAR file kept valid after every entry: the entries list is closed by a fixed tail, and
/// each new entry overwrites the tail and writes it again, so that the file can be opened in
/// devtools (or replayed) while Veneer is still recording. Past `maxFileSize` the file is
/// rotated (`NAME.1.har` is the newest old one) and a new one begun.
public final class HARWriter: Sendable {
    /// The file.
    public let path: String
    let maxFileSize: Int
    let keep: Int
    private let state = Mutex<State>(State())

    struct State {
        var descriptor: Int32 = -1
        var size = 0
        var entries = 0
    }

    static let head = Array(#"{"log":{"version":"1.2","creator":{"name":"Veneer","version":"1"},"entries":["#.utf8)
    static let tail = Array("\n]}}\n".utf8)

    /// Opens `path`: continues a HAR file this writer's format left, else rotates what is there
    /// out of the way (nothing is overwritten) and begins a new one.
    public init(path: String, maxFileSize: Int, keep: Int) throws {
        self.path = path
        self.maxFileSize = maxFileSize
        self.keep = keep
        try state.withLock { state in try open(&state) }
    }

    /// Appends one entry (compact JSON text, no newline).
    public func append(_ entry: ByteBuffer) throws {
        try state.withLock { state in
            let added = entry.readableBytes + 2
            if state.entries > 0, state.size + added > maxFileSize {
                close(state.descriptor)
                state.descriptor = -1
                rotate()
                try open(&state)
            }
            var bytes = ByteBuffer()
            bytes.reserveCapacity(added + Self.tail.count)
            if state.entries > 0 { bytes.writeInteger(UInt8(ascii: ",")) }
            bytes.writeInteger(UInt8(ascii: "\n"))
            bytes.writeImmutableBuffer(entry)
            bytes.writeBytes(Self.tail)
            let offset = state.size - Self.tail.count
            try write(state.descriptor, bytes, at: offset)
            state.size = offset + bytes.readableBytes
            state.entries += 1
        }
    }

    /// How many entries the current file holds.
    public var entries: Int { state.withLock { $0.entries } }

    private func open(_ state: inout State) throws {
        let directory = (path as NSString).deletingLastPathComponent
        if !directory.isEmpty {
            try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
        if let existing = FileManager.default.contents(atPath: path), !existing.isEmpty {
            let bytes = Array(existing)
            if bytes.starts(with: Self.head), bytes.count >= Self.head.count + Self.tail.count, Array(bytes.suffix(Self.tail.count)) == Self.tail {
                let fd = Glibc.open(path, O_RDWR | O_CLOEXEC)
                guard fd >= 0 else { throw HARFileError(path: path, reason: String(cString: strerror(errno))) }
                state.descriptor = fd
                state.size = bytes.count
                state.entries = bytes.count > Self.head.count + Self.tail.count ? 1 : 0
                return
            }
            rotate()
        }
        // 0600: even redacted, an exchange may hold what only its caller should read.
        let fd = Glibc.open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw HARFileError(path: path, reason: String(cString: strerror(errno))) }
        state.descriptor = fd
        var start = ByteBuffer()
        start.writeBytes(Self.head)
        start.writeBytes(Self.tail)
        try write(fd, start, at: 0)
        state.size = start.readableBytes
        state.entries = 0
    }

    /// `NAME.har` → `NAME.1.har` → `NAME.2.har` ..., the oldest beyond `keep` removed.
    private func rotate() {
        let manager = FileManager.default
        if keep == 0 {
            try? manager.removeItem(atPath: path)
            return
        }
        try? manager.removeItem(atPath: Self.rotated(path, keep))
        for index in stride(from: keep - 1, through: 1, by: -1) {
            try? manager.moveItem(atPath: Self.rotated(path, index), toPath: Self.rotated(path, index + 1))
        }
        try? manager.moveItem(atPath: path, toPath: Self.rotated(path, 1))
    }

    /// The name of the `index`th rotated file: `staging.har` → `staging.1.har`.
    public static func rotated(_ path: String, _ index: Int) -> String {
        let stem = path.hasSuffix(".har") ? String(path.dropLast(4)) : path
        return "\(stem).\(index).har"
    }

    private func write(_ fd: Int32, _ buffer: ByteBuffer, at offset: Int) throws {
        try buffer.withUnsafeReadableBytes { bytes in
            var done = 0
            while done < bytes.count {
                let written = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset + done))
                if written < 0 {
                    if errno == EINTR { continue }
                    throw HARFileError(path: path, reason: String(cString: strerror(errno)))
                }
                done += written
            }
        }
    }

    deinit {
        let fd = state.withLock { $0.descriptor }
        if fd >= 0 { close(fd) }
    }
}

/// A HAR file that cannot be opened or written.
public struct HARFileError: Error, CustomStringConvertible {
    /// The file.
    public let path: String
    /// The system's reason.
    public let reason: String
    /// `cannot write HAR file PATH: reason`.
    public var description: String { "cannot write HAR file \(path): \(reason)" }
}
