#if canImport(Glibc)
import Glibc
#endif
import ServiceLifecycle

/// Gives memory freed after a burst back to the system: glibc's allocator keeps freed heap
/// pages (in every thread's arena) for reuse, so resident memory would stay at a burst's peak.
/// Every `period`, when no request is inside the serving chain, `malloc_trim(0)` returns the
/// free pages. Without glibc (or without `malloc_trim`)
/// it does nothing.
struct MemoryTrimService: Service, CustomStringConvertible {
    /// The requests inside the serving chain now (nil before the first chain).
    let requestsInFlight: @Sendable () -> Int?
    /// How often an idle process is trimmed.
    var period: Duration = .seconds(2)

    var description: String { "memory return: malloc_trim when idle (every \(period))" }

    func run() async throws {
        guard let trim = Self.mallocTrim else {
            try? await gracefulShutdown()
            return
        }
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            do {
                // SIGTERM ends the wait at once: shutdown never waits for a trim period.
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: period) }
            } catch {
                return
            }
            if requestsInFlight() ?? 0 == 0 { _ = trim(0) }
        }
    }

    /// glibc's `malloc_trim`, looked up at run time (not in the Glibc module's headers).
    static let mallocTrim: (@convention(c) (Int) -> Int32)? = {
        #if canImport(Glibc)
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)
        #else
        return nil
        #endif
    }()
}
