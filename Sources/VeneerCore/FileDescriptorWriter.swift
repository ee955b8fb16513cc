#if canImport(Glibc)
@preconcurrency import Glibc
#endif

/// Writes whole buffers to a file descriptor: the log writers' one system call path.
public enum FileDescriptorWriter {
    /// Writes all of `bytes` to `fd`, going on after short writes and `EINTR`; gives up
    /// silently on any other error (a log line lost is better than a request stalled).
    public static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) {
        var offset = 0
        while offset < bytes.count {
            let written = Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                return
            }
            offset += written
        }
    }
}
