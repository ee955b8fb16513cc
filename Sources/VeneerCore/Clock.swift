import Foundation

/// Time as Veneer's components see it; injected through the build context so that tests
/// can move time by hand instead of sleeping.
public protocol VeneerClock: Sendable {
    /// Wall-clock time (for `Date`, `Expires`, `Age`, token expiry).
    func now() -> Date
    /// A monotonic reading, for measuring durations.
    func monotonic() -> Duration
    /// Sleeps for `duration` of this clock's time.
    func sleep(for duration: Duration) async throws
    /// Sleeps until ``monotonic()`` reads `deadline` (at once if it already does). A loop that
    /// reads the clock, works, then sleeps counts its pause from the reading this way: a sleep
    /// that starts late (its task scheduled after the clock moved) does not end late.
    func sleep(untilMonotonic deadline: Duration) async throws
}

extension VeneerClock {
    /// Sleeps for what remains until `deadline`.
    public func sleep(untilMonotonic deadline: Duration) async throws {
        try await sleep(for: deadline - monotonic())
    }
}

/// The real clock.
public struct SystemClock: VeneerClock {
    /// Creates the real clock.
    public init() {}
    /// The current wall-clock time.
    public func now() -> Date { Date() }
    /// `ContinuousClock` since an arbitrary origin.
    public func monotonic() -> Duration { ContinuousClock.now - SystemClock.origin }
    /// `Task.sleep`.
    public func sleep(for duration: Duration) async throws { try await Task.sleep(for: duration) }
    /// `Task.sleep` until the continuous clock's instant that `deadline` names.
    public func sleep(untilMonotonic deadline: Duration) async throws {
        try await Task.sleep(until: SystemClock.origin + deadline, clock: .continuous)
    }

    private static let origin = ContinuousClock.now
}

extension Duration {
    /// The duration in seconds, as a floating-point number.
    public var seconds: Double {
        let parts = components
        return Double(parts.seconds) + Double(parts.attoseconds) / 1e18
    }

    /// The duration in whole milliseconds.
    public var milliseconds: Int64 {
        let parts = components
        return parts.seconds * 1000 + parts.attoseconds / 1_000_000_000_000_000
    }
}
