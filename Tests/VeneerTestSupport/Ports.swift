import NIOCore
import NIOPosix
#if canImport(Glibc)
import Glibc
#endif

/// A port on 127.0.0.1 that nothing listens on (bound once, then released).
public func freePort() async throws -> Int {
    let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .bind(host: "127.0.0.1", port: 0).get()
    let port = channel.localAddress?.port ?? 0
    try await channel.close()
    return port
}

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

/// A socket call failed.
public enum PortError: Error {
    case socket(Int32)
}
