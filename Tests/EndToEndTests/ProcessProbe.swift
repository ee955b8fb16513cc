import Foundation
import VeneerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// What the tests read of a running process from /proc, and the limit they lower on it.
enum ProcessProbe {
    /// Resident memory (`VmRSS` in /proc/PID/status), in bytes.
    static func residentBytes(of pid: Int32) throws -> Int {
        try statusBytes("VmRSS", of: pid)
    }

    /// Peak resident memory (`VmHWM` in /proc/PID/status), in bytes.
    static func peakResidentBytes(of pid: Int32) throws -> Int {
        try statusBytes("VmHWM", of: pid)
    }

    /// A size line of /proc/PID/status (`NAME:   123 kB`), in bytes.
    private static func statusBytes(_ name: String, of pid: Int32) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }),
              let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "") else { throw ProbeError.unreadable(name) }
        return kilobytes * 1024
    }

    /// The share of one core `pid` used over `window`, from utime + stime in /proc/PID/stat.
    static func cpuShare(of pid: Int32, over window: Duration) async throws -> Double {
        func ticks() throws -> Int {
            let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
            // The fields after the command "(...)": state is field 3, utime 14, stime 15.
            guard let end = stat.range(of: ")", options: .backwards) else { throw ProbeError.unreadable("stat") }
            let fields = stat[end.upperBound...].split(separator: " ")
            guard fields.count > 12, let user = Int(fields[11]), let system = Int(fields[12]) else { throw ProbeError.unreadable("stat") }
            return user + system
        }
        let clock = ContinuousClock()
        let (start, before) = (clock.now, try ticks())
        try await Task.sleep(for: window)
        let (end, after) = (clock.now, try ticks())
        return Double(after - before) / Double(sysconf(Int32(_SC_CLK_TCK))) / (end - start).seconds
    }

    /// How many descriptors `pid` holds.
    static func openDescriptors(of pid: Int32) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? 0
    }

    /// `prlimit --pid`: lowers a running process's descriptor limit (the descriptors it holds stay).
    static func lowerDescriptorLimit(of pid: Int32, to limit: Int) throws {
        let status = try ChildProcess("/usr/bin/prlimit", ["--pid", "\(pid)", "--nofile=\(limit):\(limit)"]).waitBlocking()
        guard status == 0 else { throw ProbeError.unreadable("prlimit exited with \(status)") }
    }

    enum ProbeError: Error {
        case unreadable(String)
    }
}

extension Duration {
    /// In seconds, as a Double.
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}

/// A client socket driven with plain system calls, non-blocking: it sends as fast as the
/// kernel takes bytes and never reads (NIO would read, or buffer what it cannot send).
final class NonReadingClient {
    private let descriptor: Int32

    /// Connects to 127.0.0.1:`port`.
    init(port: Int) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw ProcessProbe.ProbeError.unreadable("socket") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(descriptor)
            throw ProcessProbe.ProbeError.unreadable("connect")
        }
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
    }

    /// Sends what the kernel takes of `bytes` now; how many bytes it took.
    func sendSome(_ bytes: [UInt8]) -> Int {
        let sent = bytes.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        return max(sent, 0)
    }

    deinit {
        close(descriptor)
    }
}
