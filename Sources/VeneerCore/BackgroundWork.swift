/// Work a handler starts for itself that outlives the request that started it: a cache's
/// refresh of a stale entry it has already answered with (`stale_while_revalidate`).
///
/// A factory finds it in ``BuildContext/backgroundWork``. The runtime runs the work in its
/// background runner, and the chain generation whose handler started it does not count as
/// drained until the work ends: what a reload releases of that chain, and shutdown, wait for it.
public protocol BackgroundWork: Sendable {
    /// Starts `work` without waiting for it.
    func start(_ work: @escaping @Sendable () async -> Void)
}

/// Each piece of work in a task of its own, which nobody waits for: for chains built by hand.
public struct DetachedWork: BackgroundWork {
    /// Work in tasks of their own.
    public init() {}

    /// Starts `work` in a task of its own.
    public func start(_ work: @escaping @Sendable () async -> Void) {
        Task { await work() }
    }
}
