import Foundation
import Synchronization
import Testing
import VeneerTestSupport

/// Socket activation (issue 29): with the listening socket held by systemd (here: the test),
/// a restart refuses nothing; connections wait in the socket's queue for the next process.
@Suite("Socket activation of the real binary")
struct SocketActivationProcessTests {
    /// A listening Unix socket at `path`, as systemd makes one for a socket unit.
    static func listeningSocket(_ path: String) throws -> Int32 {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8) + [0]) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, listen(descriptor, 128) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        return descriptor
    }

    /// Veneer started the way systemd starts it: the socket as descriptor 3, `LISTEN_FDS=1`,
    /// and `LISTEN_PID` its own pid (set by the shell it replaces, which has that pid).
    static func activated(_ socket: Int32, directory: String) throws -> VeneerProcess {
        try VeneerProcess(["-c", #"LISTEN_PID=$$ exec "$0" run --config veneer.yaml"#, VeneerProcess.binary], directory: directory,
                          environment: ["LISTEN_FDS": "1", "LISTEN_FDNAMES": "veneer.socket"], executable: "/bin/sh", passing: [socket])
    }

    final class Tally: Sendable {
        struct Counts { var answered = 0, failed = 0, failures: [String] = [], waitedAcross = 0 }
        let counts = Mutex(Counts())
        let stop = Atomic(false)
        /// 0: the first process serves; 1: it has exited; 2: the second one is ready.
        let phase = Atomic(0)
    }

    @Test("a client looping requests across a restart sees 0 failed requests: they wait in the passed socket's queue")
    func restartRefusesNothing() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/veneer.sock"
        try """
            environments:
              development:
                listen: unix:\(path)
                origin: { mock: {} }
            """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        let socket = try Self.listeningSocket(path)
        defer { close(socket) }

        let first = try Self.activated(socket, directory: directory)
        defer { first.terminate() }
        _ = try await first.waitUntilReady()
        #expect(first.stderr.contains("serving on the sockets systemd passed"), "\(first.stderr)")

        let tally = Tally()
        let client = Task {
            while !tally.stop.load(ordering: .relaxed) {
                let startPhase = tally.phase.load(ordering: .relaxed)
                do {
                    let response = try await UnixHTTP.request(socket: path, "GET", "/posts", timeout: .seconds(30))
                    tally.counts.withLock {
                        if response.status == 200 { $0.answered += 1 } else { $0.failed += 1; $0.failures.append("\(response.status)") }
                        // Sent before the second process was ready, answered after the first had gone.
                        if startPhase < 2, tally.phase.load(ordering: .relaxed) == 2 { $0.waitedAcross += 1 }
                    }
                } catch {
                    let endPhase = tally.phase.load(ordering: .relaxed)
                    tally.counts.withLock { $0.failed += 1; $0.failures.append("\(error) (sent in phase \(startPhase), failed in \(endPhase))") }
                }
            }
        }
        try await eventually("the client is answered") { tally.counts.withLock { $0.answered } >= 20 }
        first.signal(SIGTERM)
        #expect(await first.wait() == 0, "\(first.stderr)")
        tally.phase.store(1, ordering: .relaxed)
        #expect(FileManager.default.fileExists(atPath: path), "the passed socket is not Veneer's to remove")
        // The client goes on connecting meanwhile: its connections wait in the queue.
        try await Task.sleep(for: .milliseconds(300))

        let second = try Self.activated(socket, directory: directory)
        defer { second.terminate() }
        _ = try await second.waitUntilReady()
        tally.phase.store(2, ordering: .relaxed)
        let before = tally.counts.withLock { $0.answered }
        try await eventually("the new process answers") { tally.counts.withLock { $0.answered } >= before + 20 }
        tally.stop.store(true, ordering: .relaxed)
        await client.value

        let counts = tally.counts.withLock { $0 }
        #expect(counts.failed == 0, "failed: \(counts.failures)")
        #expect(counts.waitedAcross >= 1, "a request was sent before the new process was ready, and answered by it")
        second.signal(SIGTERM)
        #expect(await second.wait() == 0)
    }
}
