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
}
