#if canImport(Glibc)
@preconcurrency import Glibc
#endif

/// Writes whole buffers to a file descriptor: the log writers' one system call path.
public enum FileDescriptorWriter {
    /// Writes all of `bytes` to `fd`, going on after short writes and `EINTR`; gives up on
    /// any other error (a log line lost is better than a request stalled). Returns how many
    /// bytes were written.
    @discardableResult
    public static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int {
        var offset = 0
        while offset < bytes.count {
            let written = Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                return offset
            }
            offset += written
        }
        return offset
    }

    /// Writes `bytes`, whole lines ending in `\n`, in pieces of at most `PIPE_BUF` bytes cut at
    /// line ends (a longer line alone), so that lines sharing a pipe with other writers (a FIFO,
    /// `/dev/stdout` of a container) never interleave: a write of up to `PIPE_BUF` bytes to a
    /// pipe is atomic, a longer one is not.
    /// Returns how many bytes were written: all of them, or up to the write that failed (the
    /// rest is not tried).
    @discardableResult
    public static func writeLines(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int {
        var start = 0
        while start < bytes.count {
            let end = pieceEnd(bytes, from: start, limit: Int(PIPE_BUF))
            let written = writeAll(fd, UnsafeRawBufferPointer(rebasing: bytes[start..<end]))
            if written < end - start { return start + written }
            start = end
        }
        return start
    }

    /// Where the piece of ``writeLines(_:_:)`` that starts at `start` ends: after the last line
    /// end within `limit` bytes, or after the first line when that one is longer, or at the end.
    public static func pieceEnd(_ bytes: UnsafeRawBufferPointer, from start: Int, limit: Int) -> Int {
        guard bytes.count - start > limit else { return bytes.count }
        var end = start + limit
        while end > start, bytes[end - 1] != UInt8(ascii: "\n") { end -= 1 }
        if end > start { return end }
        end = start + limit
        while end < bytes.count, bytes[end - 1] != UInt8(ascii: "\n") { end += 1 }
        return end
    }
}
