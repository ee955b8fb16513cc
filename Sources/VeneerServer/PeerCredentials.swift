#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import NIOCore
import VeneerCore

/// Reads who is on the other end of a Unix socket connection: `SO_PEERCRED` (uid, gid, pid,
/// as they were at `connect(2)`, so a caller cannot change them afterwards), the
/// supplementary groups and the systemd unit from `/proc/PID` (read once per connection:
/// procfs answers from memory, in microseconds).
enum PeerCredentials {
    /// `struct ucred` of `<sys/socket.h>`: pid, uid, gid.
    struct UCred: Sendable {
        var pid: Int32 = 0
        var uid: UInt32 = 0
        var gid: UInt32 = 0
    }

    /// The identity of `channel`'s peer if it is a Unix socket connection; nil for any other.
    static func read(_ channel: any Channel) -> EventLoopFuture<PeerIdentity?> {
        guard isUnixSocket(channel), let provider = channel as? any SocketOptionProvider else {
            return channel.eventLoop.makeSucceededFuture(nil)
        }
        let credentials: EventLoopFuture<UCred> = provider.unsafeGetSocketOption(
            level: NIOBSDSocket.OptionLevel(rawValue: SOL_SOCKET), name: NIOBSDSocket.Option(rawValue: SO_PEERCRED))
        return credentials.map { identity($0) }.recover { _ in nil }
    }

    /// Whether `channel` is a Unix domain socket connection.
    static func isUnixSocket(_ channel: any Channel) -> Bool {
        if case .unixDomainSocket? = channel.localAddress { return true }
        if case .unixDomainSocket? = channel.remoteAddress { return true }
        return false
    }

    /// The identity the kernel's credentials give, with what `/proc/PID` adds (nothing if the
    /// process has gone already).
    static func identity(_ credentials: UCred) -> PeerIdentity {
        let pid = credentials.pid > 0 ? credentials.pid : nil
        var groups: [UInt32] = []
        var unit: String?
        if let pid {
            unit = readSmallFile("/proc/\(pid)/cgroup").flatMap { PeerIdentity.unit(fromCgroup: $0) }
            groups = readSmallFile("/proc/\(pid)/status").map(supplementaryGroups) ?? []
        }
        return PeerIdentity(uid: credentials.uid, gid: credentials.gid, groups: groups, pid: pid, unit: unit)
    }

    /// The `Groups:` line of `/proc/PID/status`.
    static func supplementaryGroups(_ status: String) -> [UInt32] {
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Groups:") }) else { return [] }
        return line.dropFirst("Groups:".count).split(whereSeparator: { $0 == " " || $0 == "\t" }).compactMap { UInt32($0) }
    }

    /// The first 8 KiB of a small file (procfs), or nil.
    static func readSmallFile(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: 8192)
        var filled = 0
        while filled < bytes.count {
            let count = bytes.withUnsafeMutableBytes { buffer in Glibc.read(descriptor, buffer.baseAddress! + filled, buffer.count - filled) }
            if count <= 0 { break }
            filled += count
        }
        return String(decoding: bytes[..<filled], as: UTF8.self)
    }
}
