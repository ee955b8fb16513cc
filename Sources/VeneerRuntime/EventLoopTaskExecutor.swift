import NIOCore

/// A `TaskExecutor` that runs jobs on one event loop: the preferred executor of the tasks
/// that answer requests, so that after a suspension (an upstream exchange) a request resumes
/// on its connection's loop and its nonisolated async calls run right there, instead of
/// being enqueued again for the global executor once per call.
final class EventLoopTaskExecutor: TaskExecutor {
    let eventLoop: any EventLoop

    init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
