import Foundation
import Logging
import NIOCore
import ServiceLifecycle

#if canImport(Glibc)
@preconcurrency import Glibc
#endif

/// The sd_notify protocol: datagrams to `$NOTIFY_SOCKET` (a path, or `@name` in the
/// abstract namespace). Without `NOTIFY_SOCKET` every call does nothing.
public struct SystemdNotifier: Sendable {
    let socketPath: String?
    /// The watchdog interval systemd expects pings within (`WATCHDOG_USEC`), if it is for us.
    public let watchdogInterval: Duration?

    /// Reads `NOTIFY_SOCKET`, `WATCHDOG_USEC` and `WATCHDOG_PID` from `variables`.
    public init(variables: [String: String]) {
        let path = variables["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        socketPath = path
        let forUs = variables["WATCHDOG_PID"].map { $0 == String(getpid()) } ?? true
        if path != nil, forUs, let usec = variables["WATCHDOG_USEC"].flatMap(Int64.init), usec > 0 {
            watchdogInterval = .microseconds(usec)
        } else {
            watchdogInterval = nil
        }
    }

    /// Whether systemd listens.
    public var isEnabled: Bool { socketPath != nil }

    /// Sends `KEY=VALUE` lines in one datagram.
    @discardableResult
    public func send(_ fields: [String]) -> Bool {
        guard let socketPath else { return false }
        let message = fields.joined(separator: "\n")
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var pathBytes = Array(socketPath.utf8)
        if pathBytes.first == UInt8(ascii: "@") { pathBytes[0] = 0 }  // abstract namespace
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard pathBytes.count < capacity else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: pathBytes)
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + pathBytes.count + (pathBytes.first == 0 ? 0 : 1))
        let sent = message.withCString { text in
            withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sockaddrPointer in
                    sendto(fd, text, strlen(text), Int32(MSG_NOSIGNAL), sockaddrPointer, length)
                }
            }
        }
        return sent >= 0
    }

    /// `READY=1` with a status line.
    public func ready(status: String) { send(["READY=1", "STATUS=\(status)"]) }

    /// `RELOADING=1` (with `MONOTONIC_USEC`, as systemd wants for reloads).
    public func reloading() {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        send(["RELOADING=1", "MONOTONIC_USEC=\(Int64(now.tv_sec) * 1_000_000 + Int64(now.tv_nsec) / 1000)", "STATUS=reloading the configuration"])
    }

    /// `STOPPING=1`.
    public func stopping() { send(["STOPPING=1", "STATUS=draining in-flight requests"]) }

    /// `STATUS=...`.
    public func status(_ text: String) { send(["STATUS=\(text)"]) }
}

/// Pings the watchdog at half of `WATCHDOG_USEC`, but only after every event loop has
/// run a probe task: a stalled loop stops the pings and systemd restarts the service.
struct WatchdogService: Service, CustomStringConvertible {
    let notifier: SystemdNotifier
    let eventLoopGroup: any EventLoopGroup
    let logger: Logger

    /// What the service group's log lines call it (not a dump of its fields).
    var description: String {
        guard let interval = notifier.watchdogInterval else { return "systemd watchdog (off: no WATCHDOG_USEC)" }
        return "systemd watchdog (a ping every \(interval / 2) once every event loop answers)"
    }

    func run() async throws {
        guard let interval = notifier.watchdogInterval else {
            // Nothing to do, but a service that returns would end the group.
            try? await gracefulShutdown()
            return
        }
        let period = interval / 2
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            if await allLoopsResponsive(within: period) {
                notifier.send(["WATCHDOG=1"])
            } else {
                logger.error("an event loop did not respond; withholding the watchdog ping")
            }
            do {
                try await Task.sleep(for: period)
            } catch {
                return
            }
        }
    }

    func allLoopsResponsive(within limit: Duration) async -> Bool {
        let loops = Array(eventLoopGroup.makeIterator())
        return await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                for loop in loops {
                    do { try await loop.submit {}.get() } catch { return false }
                }
                return true
            }
            group.addTask {
                try? await Task.sleep(for: limit)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }
}

/// Sends `STOPPING=1` as soon as graceful shutdown starts (it is the last service, so the
/// first to hear of it).
struct StoppingNotice: Service, CustomStringConvertible {
    let notifier: SystemdNotifier
    var description: String { "systemd STOPPING=1 notice at shutdown" }
    func run() async throws {
        try? await gracefulShutdown()
        notifier.stopping()
    }
}
