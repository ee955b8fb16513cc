#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Synchronization

/// Descriptors held back for the process itself while accepts run the process out of them.
///
/// libdispatch (under Swift concurrency's global executor on Linux) opens
/// `/proc/self/task/TID/stat` from its worker-pool monitor and traps when that open fails: a
/// process at its descriptor limit dies of SIGILL a moment later (seen under a flood of
/// connections, `ConnectionAttackTests` "out of descriptors"). So a few descriptors (`/dev/null`
/// opened `count` times) are held from the first listener on; when an accept fails for want of
/// descriptors they are given back, so that the rest of the process has room while accepts pause,
/// and taken again before accepts resume (those then fail again, and give them back, if nothing
/// was freed meanwhile).
final class DescriptorReserve: Sendable {
    /// The process's one reserve.
    static let shared = DescriptorReserve(count: 32)

    private let held: Mutex<[Int32]>
    private let count: Int

    init(count: Int) {
        self.count = count
        self.held = Mutex([])
        take()
    }

    /// Opens what is missing of the reserve (as many as can be opened).
    func take() {
        held.withLock { held in
            while held.count < count {
                let descriptor = open("/dev/null", O_RDONLY | O_CLOEXEC)
                guard descriptor >= 0 else { return }
                held.append(descriptor)
            }
        }
    }

    /// Closes the reserve: its descriptors are free for the rest of the process.
    func release() {
        held.withLock { held in
            for descriptor in held { close(descriptor) }
            held.removeAll()
        }
    }

    /// How many descriptors the reserve holds now.
    var holding: Int { held.withLock { $0.count } }
}
