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

extension PeerCredentials {
    /// The identity of the owner of the client's socket of a loopback TCP connection, asked of
    /// the kernel (`NETLINK_SOCK_DIAG`, `inet_diag`): a uid only. Nil when it is no loopback
    /// connection, or the kernel did not say (no `AF_NETLINK` in a sandbox, a client gone).
    static func loopbackOwner(_ channel: any Channel) -> PeerIdentity? {
        guard let local = channel.localAddress, let remote = channel.remoteAddress,
              let client = ClientAddress(remote), client.isLoopback else { return nil }
        return SockDiag.owner(client: remote, server: local).map { PeerIdentity(uid: $0) }
    }
}

/// One `inet_diag` exact lookup (linux/inet_diag.h, linux/sock_diag.h): the socket whose
/// source is the client's address and whose destination is the server's, and its uid.
enum SockDiag {
    static let sockDiagByFamily: UInt16 = 20
    static let netlinkSockDiag: Int32 = 4

    /// The uid owning the client's end of the connection from `client` to `server`.
    static func owner(client: SocketAddress, server: SocketAddress) -> UInt32? {
        guard let (family, clientPort, clientAddress) = parts(client), let (_, serverPort, serverAddress) = parts(server) else { return nil }
        // nlmsghdr (16) + inet_diag_req_v2 (56).
        var request = [UInt8](repeating: 0, count: 72)
        func put32(_ value: UInt32, at offset: Int) { withUnsafeBytes(of: value) { for index in 0..<4 { request[offset + index] = $0[index] } } }
        func put16(_ value: UInt16, at offset: Int) { withUnsafeBytes(of: value) { for index in 0..<2 { request[offset + index] = $0[index] } } }
        put32(72, at: 0)
        put16(sockDiagByFamily, at: 4)
        put16(1, at: 6)  // NLM_F_REQUEST: one socket, no dump
        put32(1, at: 8)
        request[16] = UInt8(family)
        request[17] = UInt8(IPPROTO_TCP)
        put32(UInt32.max, at: 20)  // every state
        // inet_diag_sockid at 24: sport, dport (network order, as they are), src, dst, if, cookie.
        request[24] = clientPort.0; request[25] = clientPort.1
        request[26] = serverPort.0; request[27] = serverPort.1
        for (index, byte) in clientAddress.enumerated() { request[28 + index] = byte }
        for (index, byte) in serverAddress.enumerated() { request[44 + index] = byte }
        put32(UInt32.max, at: 64)  // INET_DIAG_NOCOOKIE
        put32(UInt32.max, at: 68)

        let descriptor = socket(AF_NETLINK, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), netlinkSockDiag)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
        _ = setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        // sockaddr_nl of the kernel: family, pad, pid 0, groups 0.
        var kernel = [UInt8](repeating: 0, count: 12)
        withUnsafeBytes(of: sa_family_t(AF_NETLINK)) { kernel[0] = $0[0]; kernel[1] = $0[1] }
        let sent = request.withUnsafeBytes { bytes in
            kernel.withUnsafeBytes {
                sendto(descriptor, bytes.baseAddress, bytes.count, 0, $0.baseAddress!.assumingMemoryBound(to: sockaddr.self), 12)
            }
        }
        guard sent == request.count else { return nil }
        var answer = [UInt8](repeating: 0, count: 8192)
        let count = answer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
        // nlmsghdr, then inet_diag_msg: family, state, timer, retrans, sockid (48), expires,
        // rqueue, wqueue, uid (at 64 of the message), inode.
        guard count >= 16 + 72 else { return nil }
        let type = UInt16(answer[4]) | UInt16(answer[5]) << 8
        guard type == sockDiagByFamily else { return nil }
        return answer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 16 + 64, as: UInt32.self) }
    }

    /// Family, port (network order) and address bytes (16, IPv4 in the first 4).
    static func parts(_ address: SocketAddress) -> (Int32, (UInt8, UInt8), [UInt8])? {
        guard let port = address.port, let client = ClientAddress(address) else { return nil }
        let portBytes = (UInt8(truncatingIfNeeded: port >> 8), UInt8(truncatingIfNeeded: port))
        switch address {
        case .v4: return (AF_INET, portBytes, client.bytes + [UInt8](repeating: 0, count: 16 - client.bytes.count))
        case .v6: return (AF_INET6, portBytes, client.bytes)
        case .unixDomainSocket: return nil
        }
    }
}
