import Foundation
import Testing
import VeneerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// How the tests start programs (``ChildProcess``): nothing of the test process leaks into a
/// child, and starting one never depends on how many descriptors the test process holds.
@Suite("Child processes of the tests")
struct ChildProcessTests {
    @Test("a child gets its three standard streams and nothing else the test process holds")
    func onlyStandardStreams() async throws {
        let held = (0..<8).map { _ in open("/dev/null", O_RDONLY) }  // not close-on-exec
        defer { held.forEach { close($0) } }
        let (status, output) = try await ChildProcess.run("/bin/ls", ["/proc/self/fd"])
        #expect(status == 0)
        // ls's own listing of the folder is the one more.
        let descriptors = output.split(separator: "\n").compactMap { Int($0) }
        #expect(descriptors.count == 4 && descriptors.prefix(3) == [0, 1, 2], "\(descriptors)")
    }

    @Test("children start while the test process holds two thousand descriptors, from several threads at once (Foundation's Process.run crashed there)")
    func manyDescriptors() async throws {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        guard limit.rlim_max >= 4096 else { return }  // too few descriptors allowed to show it
        if limit.rlim_cur < 4096 {
            limit.rlim_cur = 4096
            setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        let held = (0..<2000).map { _ in open("/dev/null", O_RDONLY) }
        defer { held.forEach { close($0) } }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    // Allocations of every size in between, as a busy test run makes them: where
                    // a listing of /proc/self/fd lands in memory is what made the crash.
                    var churn: [[UInt8]] = []
                    for _ in 0..<50 {
                        churn.append([UInt8](repeating: 1, count: Int.random(in: 1...70_000)))
                        if churn.count > 40 { churn.removeFirst(20) }
                        let child = try ChildProcess("/bin/true", [])
                        let status = await child.waitUntilExit()
                        #expect(status == 0)
                    }
                }
            }
            try await group.waitForAll()
        }
    }
}
