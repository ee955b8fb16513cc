import NIOCore
import NIOPosix
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A port on 127.0.0.1 that nothing listens on, for a server told its port in advance (a
/// PostgreSQL, a configured `listen:`). Taken below the kernel's ephemeral range, where neither a
/// listener on port 0 nor an outgoing connection of a test running beside it can take it between
/// this check and its use, and never handed out twice in one run.
///
/// The check binds a socket (SO_REUSEADDR, as servers bind) and never listens on it: a child
/// process another test spawns at that moment keeps a copy of it until its exec, and a copy of
/// a listening socket would keep the server from binding the port.
public func freePort() async throws -> Int {
    let ephemeralStart = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8))
        .flatMap { $0.split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) } } ?? 32768
    let range = 10_000..<max(ephemeralStart, 10_001)
    for _ in 0..<1000 {
        let port = Int.random(in: range)
        guard handedOut.withLock({ $0.insert(port).inserted }) else { continue }
        if try bindable(port) { return port }
    }
    throw PortError.noFreePort
}

/// Whether a socket can bind 127.0.0.1:`port` (with SO_REUSEADDR, so a port only in TIME_WAIT
/// is free, and one a server listens on is not).
private func bindable(_ port: Int) throws -> Bool {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard descriptor >= 0 else { throw PortError.socket(errno) }
    defer { close(descriptor) }
    var reuse: Int32 = 1
    setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
}

/// Ports ``freePort()`` handed out in this run.
private let handedOut = Mutex<Set<Int>>([])

/// A port on 127.0.0.1 that refuses connections for as long as `body` runs: a socket is bound
/// to it but never listens, so no other test can take the port meanwhile (unlike ``freePort()``).
public func withRefusingPort<T>(_ body: (Int) async throws -> T) async throws -> T {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { throw PortError.socket(errno) }
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = 0
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0 }
    }
    guard bound else { throw PortError.socket(errno) }
    return try await body(Int(UInt16(bigEndian: address.sin_port)))
}

/// A socket call failed, or no free port was found.
public enum PortError: Error {
    case socket(Int32)
    case noFreePort
}
