import NIOCore
import NIOPosix
import Testing
@testable import VeneerCore
import VeneerTestSupport

/// `limits.buffered`: reservations up to the limit, refused beyond it, given back when they go.
@Suite("Buffer budget")
struct BufferBudgetTests {
    @Test("reservations up to the limit; beyond it none; a reservation gone gives its bytes back")
    func reserve() {
        let budget = BufferBudget(limit: 100)
        var first: BufferBudget.Reservation? = budget.reserve(60)
        #expect(first != nil && budget.inUse == 60)
        #expect(budget.reserve(50) == nil, "over the limit")
        #expect(budget.inUse == 60)
        let second = budget.reserve(40)
        #expect(second != nil && budget.inUse == 100)
        #expect(second?.grow(by: 1) == false)
        first = nil
        #expect(budget.inUse == 40)
        #expect(second?.grow(by: 60) == true && budget.inUse == 100)
        _ = first
    }

    @Test("a resized budget refuses what the new limit has no room for; what is held stays")
    func resize() {
        let budget = BufferBudget(limit: 100)
        let held = budget.reserve(80)
        budget.resize(to: 50)
        #expect(budget.reserve(1) == nil && held?.held == 80)
    }

    @Test("a streamed body read whole reserves as it comes: beyond the budget, 503 overloaded, and the stream is cut")
    func collect() async throws {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let budget = BufferBudget(limit: 15)
        let stream = BodyStream.of([ByteBuffer(string: "0123456789"), ByteBuffer(string: "0123456789")], on: loop)
        do {
            _ = try await stream.collect(upTo: 100, budget: budget)
            Issue.record("read whole over the budget")
        } catch let error as ProxyError {
            #expect(error.code == .overloaded && error.status == .serviceUnavailable)
        }
        try await eventually("the reservation was given back (\(budget.inUse) in use)") { budget.inUse == 0 }
        let fits = BodyStream.of([ByteBuffer(string: "0123456789")], on: loop)
        #expect(String(buffer: try await fits.collect(upTo: 100, budget: budget)) == "0123456789")
    }

    // MARK: Waiting for room (limits.buffered_wait, limits.buffered_waiters)

    @Test("the wait queue: first come, first served; a large head is not overtaken; full, it refuses; a deadline takes its waiter out")
    func waitQueue() {
        var queue = BufferBudgetWaitQueue<String>(capacity: 3)
        guard case .queued(let big) = queue.wait(for: 50, "big"), case .queued = queue.wait(for: 10, "small"),
              case .queued(let last) = queue.wait(for: 10, "last") else {
            Issue.record("three waiters fit in a queue of three")
            return
        }
        guard case .refused("fourth") = queue.wait(for: 1, "fourth") else {
            Issue.record("a fourth waiter is refused at once")
            return
        }
        #expect(queue.grantable(available: 40) == (0, 0), "the small one behind does not overtake the big one")
        #expect(queue.grantable(available: 65) == (2, 60))
        #expect(queue.granted(2).map(\.0) == ["big", "small"] && queue.count == 1)
        #expect(queue.timedOut(big) == nil, "served already: its late deadline finds nothing")
        #expect(queue.timedOut(last) == "last" && queue.count == 0)
        #expect(queue.grantable(available: 100) == (0, 0))
        var closed = BufferBudgetWaitQueue<String>(capacity: 0)
        guard case .refused = closed.wait(for: 1, "any") else {
            Issue.record("with no waiters allowed, nobody waits")
            return
        }
    }

    @Test("a reservation with no room waits; the room another gives back within the wait is its own")
    func waitsForRoom() async throws {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let budget = BufferBudget(limit: 100, wait: .seconds(10), waiters: 4)
        var held: BufferBudget.Reservation? = budget.reserve(80)
        let granted = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<BufferBudget.Reservation?, any Error>) in
            budget.reserve(50, waitingOn: loop) { continuation.resume(returning: $0) }
            #expect(budget.waiters == 1)
            held = nil
        }
        #expect(granted?.held == 50 && budget.inUse == 50 && budget.waiters == 0)
        #expect(budget.peak == 80, "never over the limit")
        _ = held
    }

    @Test("a reservation that finds no room within the wait is refused; beyond limits.buffered_waiters, at once")
    func waitEnds() async throws {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let budget = BufferBudget(limit: 100, wait: .milliseconds(100), waiters: 1)
        let held = budget.reserve(100)
        let clock = ContinuousClock()
        let start = clock.now
        async let first = withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            budget.reserve(1, waitingOn: loop) { continuation.resume(returning: $0 != nil) }
        }
        try await eventually("the first waits") { budget.waiters == 1 }
        let second = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            budget.reserve(1, waitingOn: loop) { continuation.resume(returning: $0 != nil) }
        }
        #expect(!second, "the queue is full: refused at once")
        #expect(await first == false)
        #expect(clock.now - start >= .milliseconds(100), "it waited its deadline out")
        #expect(budget.waiters == 0 && budget.inUse == 100)
        _ = held
    }

    @Test("a body collected whole waits briefly for room: one given back in time lets it through")
    func collectWaits() async throws {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let budget = BufferBudget(limit: 15, wait: .seconds(10))
        var held: BufferBudget.Reservation? = budget.reserve(10)
        let stream = BodyStream.of([ByteBuffer(string: "0123456789")], on: loop)
        async let body = stream.collect(upTo: 100, budget: budget)
        try await eventually("the collect waits for room") { budget.waiters == 1 }
        held = nil
        #expect(String(buffer: try await body) == "0123456789")
        _ = held
    }

    @Test("a body collected into a response holds its share until the response goes")
    func collectedHolds() async throws {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let budget = BufferBudget(limit: 100)
        var response: ProxyResponse? = try await ProxyResponse(status: .ok, stream: BodyStream.of([ByteBuffer(string: "0123456789")], on: loop))
            .collected(upTo: 100, budget: budget)
        #expect(budget.inUse == 10 && response?.reservation?.held == 10)
        response = nil
        // The stream it was collected from lets go of its last reference on its event loop:
        // on a loaded run that comes a moment after (once 10 bytes were still held at once).
        try await eventually("the share is given back once the response is gone") { budget.inUse == 0 }
    }

    @Test("a copy kept while a body passes takes its share; with no room it is dropped, and gives its share back when taken")
    func copy() {
        let budget = BufferBudget(limit: 15)
        let copy = BodyStream.Copy(limit: 100, budget: budget)
        copy.append(ByteBuffer(string: "0123456789"))
        #expect(budget.inUse == 10 && copy.reserved == 10)
        #expect(String(buffer: copy.take() ?? ByteBuffer()) == "0123456789" && budget.inUse == 0)
        let dropped = BodyStream.Copy(limit: 100, budget: budget)
        dropped.append(ByteBuffer(string: "0123456789"))
        dropped.append(ByteBuffer(string: "0123456789"))
        #expect(dropped.take() == nil && budget.inUse == 0, "over the budget: dropped, its share given back")
    }
}
