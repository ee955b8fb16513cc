#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import VeneerConfig
import VeneerCore

/// Socket activation (`sd_listen_fds(3)`): the listening sockets systemd passes from descriptor
/// 3 on (`LISTEN_FDS`, for the process `LISTEN_PID`, named by `LISTEN_FDNAMES`), used instead
/// of binding. With them, a restart or an upgrade refuses nothing: connections wait in the
/// socket's queue, which systemd keeps open, while the next process starts.
public struct SocketActivation: Sendable, Equatable {
    /// One socket passed.
    public struct Passed: Sendable, Equatable {
        /// Its descriptor.
        public let descriptor: Int32
        /// Its `FileDescriptorName=` (the socket unit's name unless set).
        public let name: String?
        /// Where it listens (nil if it is no socket Veneer can serve).
        public let address: ListenAddress?
    }

    /// Which socket serves which listener.
    public struct Assignment: Sendable, Equatable {
        /// By place in `listen`.
        public var main: [Int: Passed] = [:]
        /// The admin listener's.
        public var admin: Passed?
        /// Sockets that match no listener: each serves the posts API too (the socket unit says
        /// where Veneer listens, e.g. a drop-in that adds `127.0.0.1:8080`).
        public var extra: [Passed] = []
    }

    /// The sockets passed.
    public let passed: [Passed]

    /// The sockets passed to this process by `variables` (none unless `LISTEN_PID` is `pid`).
    public static func from(_ variables: [String: String], pid: Int32 = getpid()) -> SocketActivation {
        guard let pidText = variables["LISTEN_PID"], Int32(pidText) == pid,
              let count = variables["LISTEN_FDS"].flatMap({ Int($0) }), count > 0, count < 1024 else {
            return SocketActivation(passed: [])
        }
        let names = variables["LISTEN_FDNAMES"].map { $0.split(separator: ":", omittingEmptySubsequences: false).map(String.init) } ?? []
        let passed = (0..<count).map { index -> Passed in
            let descriptor = Int32(3 + index)
            // Veneer starts no programs, but none of them should inherit the sockets.
            _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
            return Passed(descriptor: descriptor, name: index < names.count ? names[index] : nil, address: address(of: descriptor))
        }
        return SocketActivation(passed: passed)
    }

    /// Matches the sockets to the listeners: a socket named `admin` serves the admin listener
    /// (when there is one); otherwise a socket serves the listener whose address is its own
    /// (the same path; the same address and port, `localhost` being loopback); what is left
    /// serves the posts API as well. A listener no socket matches is bound as without systemd.
    public func assign(listeners: [ListenAddress], admin: ListenAddress?) -> Assignment {
        var assignment = Assignment()
        for socket in passed {
            if admin != nil, assignment.admin == nil, socket.name == "admin" || admin.map({ Self.matches(socket.address, $0) }) == true {
                assignment.admin = socket
            } else if let index = listeners.indices.first(where: { assignment.main[$0] == nil && Self.matches(socket.address, listeners[$0]) }) {
                assignment.main[index] = socket
            } else if socket.address != nil {
                assignment.extra.append(socket)
            }
        }
        return assignment
    }

    /// Whether a passed socket listening on `address` is the one `listener` names.
    static func matches(_ address: ListenAddress?, _ listener: ListenAddress) -> Bool {
        guard let address else { return false }
        if let path = listener.socketPath { return address.socketPath == path }
        guard address.socketPath == nil, listener.port != 0, address.port == listener.port else { return false }
        if listener.host == "localhost" { return ClientAddress(address.host)?.isLoopback == true }
        guard let wanted = ClientAddress(listener.host), let actual = ClientAddress(address.host) else { return false }
        return wanted.unmapped == actual.unmapped
    }

    /// Where the listening socket `descriptor` listens; nil for anything else.
    static func address(of descriptor: Int32) -> ListenAddress? {
        var listening: Int32 = 0
        var size = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(descriptor, SOL_SOCKET, SO_ACCEPTCONN, &listening, &size) == 0, listening == 1 else { return nil }
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        guard named == 0 else { return nil }
        switch Int32(storage.ss_family) {
        case AF_UNIX:
            let path = withUnsafeBytes(of: &storage) { bytes -> String in
                let sunPath = bytes.dropFirst(MemoryLayout<sa_family_t>.size).prefix(Int(length) - MemoryLayout<sa_family_t>.size)
                return String(decoding: sunPath.prefix { $0 != 0 }, as: UTF8.self)
            }
            return ListenAddress(socketPath: path)
        case AF_INET:
            return withUnsafeBytes(of: &storage) { bytes in
                let port = Int(UInt16(bytes[2]) << 8 | UInt16(bytes[3]))
                return ClientAddress(bytes: Array(bytes[4..<8])).map { ListenAddress(host: $0.description, port: port) }
            }
        case AF_INET6:
            return withUnsafeBytes(of: &storage) { bytes in
                let port = Int(UInt16(bytes[2]) << 8 | UInt16(bytes[3]))
                return ClientAddress(bytes: Array(bytes[8..<24])).map { ListenAddress(host: $0.description, port: port) }
            }
        default:
            return nil
        }
    }
}
