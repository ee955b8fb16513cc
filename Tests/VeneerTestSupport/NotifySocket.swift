import Foundation
import Synchronization

#if canImport(Glibc)
@preconcurrency import Glibc
#endif

/// A real sd_notify socket for tests: a Unix datagram socket that collects every message as it
/// arrives, read by a thread of its own as systemd reads its own. (Read only when a test looked,
/// its queue of ten datagrams filled with watchdog pings while a busy test run kept the test
/// away, and the process under test blocked in its next send, STOPPING=1 included.)
public final class NotifySocket: Sendable {
    /// Its path (give it to the process as `NOTIFY_SOCKET`).
    public let path: String
    private let fd: Int32
    private let inbox = Inbox()

    /// Binds a new socket under `directory`.
    public init(directory: String) throws {
        path = directory + "/notify.sock"
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.EIO) }
        fd = descriptor
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard result == 0 else {
            close(fd)
            throw POSIXError(.EADDRINUSE)
        }
        // Wakes every 100 ms to see whether it should stop (closing a descriptor another thread
        // waits on is no way to stop it).
        var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let inbox = inbox
        Thread.detachNewThread {
            var buffer = [UInt8](repeating: 0, count: 4096)
            while inbox.state.withLock({ $0.reading }) {
                let count = recv(descriptor, &buffer, buffer.count, 0)
                if count > 0 {
                    let text = String(decoding: buffer[0..<count], as: UTF8.self)
                    inbox.state.withLock { $0.messages.append(text) }
                }
            }
            close(descriptor)
        }
    }

    /// Every message received so far.
    public var messages: [String] { inbox.state.withLock { $0.messages } }

    deinit {
        inbox.state.withLock { $0.reading = false }
        unlink(path)
    }

    final class Inbox: Sendable {
        let state = Mutex<(messages: [String], reading: Bool)>(([], true))
    }
}
