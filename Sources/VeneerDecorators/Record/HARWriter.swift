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
///
/// One writer per file: it writes at the offset it keeps, so a second one on the same file
/// would write over the first's entries. The record factory keeps one per canonical path for
/// the life of the instance (``CarriedState/lasting(for:make:)``), and the writer holds an
/// exclusive `flock` on its file, so that a second writer (another instance, another
/// process) is refused rather than corrupting it. The file is never opened through a
/// symbolic link (`O_NOFOLLOW`): a link at the path is refused.
public final class HARWriter: Sendable {
    /// The file.
    public let path: String
    private let state = Mutex<State>(State())

    struct State {
        var descriptor: Int32 = -1
        var size = 0
        var entries = 0
        var maxFileSize = 0
        var keep = 0
    }

    static let head = Array(#"{"log":{"version":"1.2","creator":{"name":"Veneer","version":"1"},"entries":["#.utf8)
    static let tail = Array("\n]}}\n".utf8)

    /// Opens `path`: continues a HAR file this writer's format left, else rotates what is there
    /// out of the way (nothing is overwritten) and begins a new one. Throws when the path is a
    /// symbolic link or not a regular file, or another writer holds the file.
    public init(path: String, maxFileSize: Int, keep: Int) throws {
        self.path = path
        try state.withLock { state in
            state.maxFileSize = maxFileSize
            state.keep = keep
            try open(&state)
        }
    }

    /// Changes the rotation settings (a reload that changed `max_file_size` or `keep` of the
    /// file this writer holds).
    public func setRotation(maxFileSize: Int, keep: Int) {
        state.withLock { state in
            state.maxFileSize = maxFileSize
            state.keep = keep
        }
    }

    /// Appends one entry (compact JSON text, no newline).
    public func append(_ entry: ByteBuffer) throws {
        try state.withLock { state in
            let added = entry.readableBytes + 2
            if state.entries > 0, state.size + added > state.maxFileSize {
                close(state.descriptor)
                state.descriptor = -1
                rotate(keep: state.keep)
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
        // What is at the path now, without following a link: continued if it is a HAR file
        // this writer's format left, else rotated away.
        let existing = Glibc.open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        if existing >= 0 {
            do {
                // Locked first: a file another writer holds is neither continued nor rotated.
                try lock(existing)
                if let size = try continuable(existing) {
                    state.descriptor = existing
                    state.size = size
                    state.entries = size > Self.head.count + Self.tail.count ? 1 : 0
                    return
                }
            } catch {
                close(existing)
                throw error
            }
            close(existing)
            rotate(keep: state.keep)
        } else if errno == ELOOP || errno == EMLINK {
            throw HARFileError(path: path, reason: "it is a symbolic link; Veneer does not write through links (give the file's own path)")
        } else if errno != ENOENT {
            throw HARFileError(path: path, reason: String(cString: strerror(errno)))
        }
        // 0600: even redacted, an exchange may hold what only its caller should read.
        // O_EXCL: whatever appeared at the path since (a link) is refused, never written through.
        let fd = Glibc.open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let reason = errno == EEXIST ? "something appeared at the path while it was being created (a link?)" : String(cString: strerror(errno))
            throw HARFileError(path: path, reason: reason)
        }
        do {
            try lock(fd)
            var start = ByteBuffer()
            start.writeBytes(Self.head)
            start.writeBytes(Self.tail)
            try write(fd, start, at: 0)
            state.descriptor = fd
            state.size = start.readableBytes
            state.entries = 0
        } catch {
            close(fd)
            throw error
        }
    }

    /// The size of the open file if it is a HAR file this writer's format left (its head and
    /// tail read, not the whole file); nil when it is something else, to rotate away. Throws
    /// when it is not a regular file.
    private func continuable(_ fd: Int32) throws -> Int? {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw HARFileError(path: path, reason: String(cString: strerror(errno))) }
        guard info.st_mode & mode_t(S_IFMT) == mode_t(S_IFREG) else { throw HARFileError(path: path, reason: "it is not a regular file") }
        let size = Int(info.st_size)
        guard size >= Self.head.count + Self.tail.count else { return nil }
        var head = [UInt8](repeating: 0, count: Self.head.count)
        var tail = [UInt8](repeating: 0, count: Self.tail.count)
        let readHead = head.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        let readTail = tail.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(size - Self.tail.count)) }
        guard readHead == head.count, readTail == tail.count, head == Self.head, tail == Self.tail else { return nil }
        return size
    }

    /// An exclusive lock on the file for as long as it is open: a second writer is refused.
    private func lock(_ fd: Int32) throws {
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let reason = errno == EWOULDBLOCK ? "another writer (another Veneer, or another record on the same file) holds it" : String(cString: strerror(errno))
            throw HARFileError(path: path, reason: reason)
        }
    }

    /// `NAME.har` → `NAME.1.har` → `NAME.2.har` ..., the oldest beyond `keep` removed. Renames
    /// and removals act on the names themselves: a link among them is moved, never followed.
    private func rotate(keep: Int) {
        if keep == 0 {
            unlink(path)
            return
        }
        unlink(Self.rotated(path, keep))
        for index in stride(from: keep - 1, through: 1, by: -1) {
            rename(Self.rotated(path, index), Self.rotated(path, index + 1))
        }
        rename(path, Self.rotated(path, 1))
    }

    /// `path` with its directory's links resolved and `.`/`..` gone: one name per file, whatever
    /// the spelling (the file itself must not be a link, and need not exist yet).
    public static func canonicalPath(_ path: String) -> String {
        let standardized = (path as NSString).standardizingPath
        let directory = (standardized as NSString).deletingLastPathComponent
        let name = (standardized as NSString).lastPathComponent
        guard let resolved = realpath(directory.isEmpty ? "." : directory, nil) else { return standardized }
        defer { free(resolved) }
        let base = String(cString: resolved)
        return base == "/" ? "/" + name : base + "/" + name
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
