import Foundation
import Synchronization

#if canImport(Glibc)
@preconcurrency import Glibc
#endif

/// A real sd_notify socket for tests: a Unix datagram socket that collects every message.
public final class NotifySocket: Sendable {
    /// Its path (give it to the process as `NOTIFY_SOCKET`).
    public let path: String
    private let fd: Int32
    private let received = Mutex<[String]>([])

    /// Binds a new socket under `directory`.
    public init(directory: String) throws {
        path = directory + "/notify.sock"
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard result == 0 else { throw POSIXError(.EADDRINUSE) }
    }

    /// Every message received so far (reads what is waiting first).
    public var messages: [String] {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            guard count > 0 else { break }
            let text = String(decoding: buffer[0..<count], as: UTF8.self)
            received.withLock { $0.append(text) }
        }
        return received.withLock { $0 }
    }

    deinit {
        close(fd)
        unlink(path)
    }
}
