import Testing

/// How long ``eventually(_:timeout:sourceLocation:isolation:_:)`` waits unless told: generous,
/// because it costs nothing when the condition comes (the wait ends at once) and a loaded
/// machine running every test side by side can take seconds for what takes milliseconds alone.
public let eventuallyTimeout: Duration = .seconds(30)

/// Waits until `condition` holds: the one way a test waits for something that happens in the
/// background (a server's counter, a line in a log, a process's answer). The condition is
/// checked at once, then again and again (every 2 ms at first, backing off to every 50 ms).
///
/// When it still does not hold after `timeout`, records an issue at the caller's source location,
/// "timed out after 30.0 seconds waiting until `what`", and returns false (the test goes on,
/// as after a failed `#expect`; `guard try await eventually(...) else { return }` stops it).
/// `what` is read only then, so it can show what the condition saw last.
/// An error thrown by `condition` ends the wait and is thrown (`try?` inside it when an error
/// only means "not yet").
///
/// Something that must *not* happen cannot be awaited: a test proving that sleeps for a bounded
/// time, and says so in a comment.
@discardableResult
public func eventually(
    _ what: @autoclosure () -> Comment,
    timeout: Duration = eventuallyTimeout,
    sourceLocation: SourceLocation = #_sourceLocation,
    isolation: isolated (any Actor)? = #isolation,
    _ condition: () async throws -> Bool
) async throws -> Bool {
    if try await poll(timeout: timeout, condition) { return true }
    Issue.record("timed out after \(timeout) waiting until \(what())", sourceLocation: sourceLocation)
    return false
}

/// The loop behind ``eventually(_:timeout:sourceLocation:isolation:_:)``, for the helpers of this
/// module that report a time-out their own way (a thrown error with what a process printed):
/// true once `condition` held, false when `timeout` passed first.
func poll(
    timeout: Duration,
    isolation: isolated (any Actor)? = #isolation,
    _ condition: () async throws -> Bool
) async throws -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    var interval = Duration.milliseconds(2)
    while true {
        if try await condition() { return true }
        let now = clock.now
        guard now < deadline else { return false }
        try await Task.sleep(until: min(now + interval, deadline), clock: clock)
        interval = min(interval * 2, .milliseconds(50))
    }
}
