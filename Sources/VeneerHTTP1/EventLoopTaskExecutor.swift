import NIOCore
import Synchronization

/// A `TaskExecutor` that runs jobs on one event loop: the preferred executor of the tasks
/// that answer requests, so that after a suspension (an upstream exchange) a request resumes
/// on its connection's loop and its async calls run right there.
///
/// One per loop (``for(_:)``). Jobs are batched: the first job of a batch schedules one run
/// on the loop, which runs every job that arrived meanwhile (64 requests resumed in one tick
/// cost one scheduled closure, not 64).
public final class EventLoopTaskExecutor: TaskExecutor {
    /// The loop its jobs run on.
    public let eventLoop: any EventLoop
    private let queue = Mutex<[UnownedJob]>([])
    /// The batch being run; touched only on the loop, inside ``drain()``.
    nonisolated(unsafe) private var running: [UnownedJob] = []

    private init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    private static let executors = PerEventLoop { EventLoopTaskExecutor($0) }

    /// The executor of `eventLoop` (made on first use; asked once per connection).
    public static func `for`(_ eventLoop: any EventLoop) -> EventLoopTaskExecutor {
        executors(eventLoop)
    }

    /// Queues a job; the first of a batch schedules the run.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let first = queue.withLock { jobs in
            jobs.append(job)
            return jobs.count == 1
        }
        if first {
            eventLoop.execute { self.drain() }
        }
    }

    private func drain() {
        queue.withLock { swap(&$0, &running) }
        let executor = asUnownedTaskExecutor()
        for job in running {
            job.runSynchronously(on: executor)
        }
        running.removeAll(keepingCapacity: true)
    }
}
