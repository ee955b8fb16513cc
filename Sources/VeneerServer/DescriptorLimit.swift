#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The process's descriptor limit (`RLIMIT_NOFILE`), raised at start from its soft value to
/// its hard one, as Go's runtime does (nginx when told, `worker_rlimit_nofile`): a descriptor per client
/// connection and per upstream connection, and the soft default of many systems (1024) is far
/// below `limits.connections`. The hard limit is the administrator's (systemd's
/// `LimitNOFILE=`, `ulimit -Hn`); it is never raised. What the accept guard does at the limit
/// is unchanged (``AcceptGuardHandler``, ``DescriptorReserve``).
public enum DescriptorLimit {
    /// The soft and hard limits, before and after ``raiseToHard()``.
    public struct Change: Sendable, Equatable {
        /// The soft limit found at start.
        public var before: UInt64
        /// The soft limit now (the hard limit when raising worked).
        public var after: UInt64
        /// The hard limit.
        public var hard: UInt64
    }

    /// The soft limit to set for these limits; nil when the soft one is already the hard one.
    static func target(soft: UInt64, hard: UInt64) -> UInt64? {
        soft < hard ? hard : nil
    }

    /// Raises the soft limit to the hard one; returns the limits (nil when they cannot be read).
    @discardableResult
    public static func raiseToHard() -> Change? {
        var limits = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limits) == 0 else { return nil }
        let before = UInt64(limits.rlim_cur)
        var change = Change(before: before, after: before, hard: UInt64(limits.rlim_max))
        guard let target = target(soft: before, hard: change.hard) else { return change }
        limits.rlim_cur = rlim_t(target)
        if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limits) == 0 { change.after = target }
        return change
    }
}
