import Foundation
import Synchronization
import Testing
import VeneerCore
import VeneerTestSupport
@testable import VeneerDecorators

/// The token loop's wait counts its pause from the turn that computed it, so a clock that moves
/// before the sleeping task starts cannot push the wake later (the proactive refresh missed its
/// time that way on a starved machine: the pause was counted again from after the move).
@Suite("Wakeup and the clocks' deadlines")
struct WakeupTests {
    @Test("a wait whose deadline passed before the sleep began returns at once")
    func deadlinePassed() async throws {
        let clock = ManualClock()
        let wakeup = Wakeup()
        let turn = clock.monotonic()
        clock.advance(by: .seconds(5))
        let returned = try await withDeadline(.seconds(20)) { await wakeup.wait(until: turn + .seconds(1), clock: clock) }
        #expect(returned, "the wait slept past its deadline")
    }

    @Test("a wait that began before its deadline wakes when the clock reaches it, not later")
    func deadlineAhead() async throws {
        let clock = ManualClock()
        let wakeup = Wakeup()
        let turn = clock.monotonic()
        clock.advance(by: .milliseconds(600))
        let returned = Flags()
        let waiting = Task {
            await wakeup.wait(until: turn + .seconds(1), clock: clock)
            returned.note("returned")
        }
        defer { waiting.cancel() }
        try await eventually("the wait sleeps") { clock.sleeperCount == 1 }
        #expect(returned.noted.isEmpty)
        clock.advance(by: .milliseconds(400))
        try await eventually("a sleep begun at 0.6 s and counted from 0 s ends at 1 s") { returned.noted == ["returned"] }
    }

    @Test("the manual clock's sleep(for:) counts from its start, sleep(untilMonotonic:) from the clock's origin")
    func manualClockForms() async throws {
        let clock = ManualClock()
        clock.advance(by: .seconds(10))
        let woken = Flags()
        let relative = Task { try await clock.sleep(for: .seconds(1)); woken.note("for") }
        let absolute = Task { try await clock.sleep(untilMonotonic: .seconds(12)); woken.note("until") }
        defer { relative.cancel(); absolute.cancel() }
        try await eventually("both sleep") { clock.sleeperCount == 2 }
        #expect(try await withDeadline(.seconds(20)) { try await clock.sleep(untilMonotonic: .seconds(3)) },
                "a reading already passed")
        clock.advance(by: .seconds(1))
        try await eventually("sleep(for: 1 s) begun at 10 s ends at 11 s") { woken.noted == ["for"] }
        clock.advance(by: .seconds(1))
        try await eventually("sleep(untilMonotonic: 12 s) ends at 12 s") { woken.noted == ["for", "until"] }
    }

    @Test("the system clock's sleep(untilMonotonic:) of a past reading returns at once")
    func systemClockPast() async throws {
        let clock = SystemClock()
        #expect(try await withDeadline(.seconds(20)) { try await clock.sleep(untilMonotonic: clock.monotonic() - .seconds(1)) })
    }
}

/// True when `body` finished within `limit` of real time, false when it did not (it is then
/// left running, cancelled).
private func withDeadline(_ limit: Duration, _ body: @escaping @Sendable () async throws -> Void) async throws -> Bool {
    try await withThrowingTaskGroup(of: Bool.self) { group in
        group.addTask { try await body(); return true }
        group.addTask { try? await Task.sleep(for: limit); return false }
        let first = try await group.next() ?? false
        group.cancelAll()
        return first
    }
}

/// What the sleeping tasks noted, in order.
private final class Flags: Sendable {
    private let names = Mutex<[String]>([])
    func note(_ name: String) { names.withLock { $0.append(name) } }
    var noted: [String] { names.withLock { $0 } }
}
