import NIOCore
import Testing
@testable import VeneerServer

@Suite("the status page's 15 minutes of traffic (TrafficHistory)")
struct TrafficHistoryTests {
    @Test("rate, hit ratio, p50 and p99 per 10-second bucket, per environment, 90 buckets whatever the traffic")
    func series() {
        let origin = NIODeadline.now()
        let history = TrafficHistory(origin: origin)
        history.serving("development")
        let second = { (seconds: Int64) in origin + .seconds(seconds) }
        // Bucket 0: 100 answers, 1 ms but one of 500 ms; 80 with a cache status, 60 of them hits.
        for index in 0..<100 {
            history.record(answered: second(1), duration: index == 99 ? .milliseconds(500) : .milliseconds(1),
                           cacheStatus: index < 60 ? "veneer; hit" : index < 80 ? "veneer; fwd=miss; stored" : nil)
        }
        // Bucket 2: 10 answers of 20 ms.
        for _ in 0..<10 { history.record(answered: second(25), duration: .milliseconds(20), cacheStatus: nil) }
        let series = history.series("development", now: second(30))
        #expect(series.rate.count == 90 && series.p99.count == 90)
        #expect(series.rate[86] == 10)
        #expect(series.hitRatio[86] == 0.75)
        #expect(series.rate[87] == 0 && series.p50[87] == nil)
        #expect((1...1.3).contains(series.p50[86] ?? 0), "\(String(describing: series.p50[86]))")
        #expect((1...1.3).contains(series.p99[86] ?? 0), "99 of 100 are 1 ms")
        #expect((20...26).contains(series.p50[88] ?? 0) && series.hitRatio[88] == nil)
        // The current bucket's rate is over the part of it that passed (5 s of 10).
        #expect(series.rate[89] == 0)
        history.record(answered: second(35), duration: .milliseconds(1), cacheStatus: nil)
        #expect(history.series("development", now: second(35)).rate[89] == 0.2)
        // Another environment has its own curves; 15 minutes later the old buckets are gone.
        #expect(history.series("staging", now: second(30)).rate.allSatisfy { $0 == 0 })
        #expect(history.series("development", now: second(30 + 900)).rate.allSatisfy { $0 == 0 })
    }

    @Test("a latency bin is a third of an octave from 0.1 ms; what is beyond the last goes to it")
    func bins() {
        #expect(TrafficHistory.bin(.microseconds(50)) == 0)
        #expect(TrafficHistory.upperBound(TrafficHistory.bin(.milliseconds(1))) >= 1)
        #expect(TrafficHistory.upperBound(TrafficHistory.bin(.milliseconds(1))) < 1.27)
        #expect(TrafficHistory.bin(.seconds(3600)) == TrafficHistory.binCount - 1)
        #expect(TrafficHistory.bin(nanoseconds: 3_600_000_000_000) == TrafficHistory.binCount - 1 && TrafficHistory.bin(nanoseconds: 0) == 0)
        // Bin i holds what passes bin i-1's upper bound up to its own (found without a logarithm).
        for index in 0..<(TrafficHistory.binCount - 1) {
            let bound = Int64(TrafficHistory.upperBound(index) * 1e6)
            #expect(TrafficHistory.bin(.nanoseconds(bound - 1)) == index, "\(index)")
            #expect(TrafficHistory.bin(.nanoseconds(bound + 1)) == index + 1, "\(index)")
            // The edge's way, from its nanoseconds: the same bins.
            #expect(TrafficHistory.bin(nanoseconds: bound - 1) == index && TrafficHistory.bin(nanoseconds: bound + 1) == index + 1, "\(index)")
        }
    }

    @Test("switching environments back and forth: each answer is noted in the ring of the one serving then")
    func switching() {
        let origin = NIODeadline.now()
        let history = TrafficHistory(origin: origin)
        let at = origin + .seconds(1)
        history.record(answered: at, duration: .milliseconds(1), cacheStatus: nil)
        history.serving("development")
        for _ in 0..<3 { history.record(answered: at, duration: .milliseconds(1), cacheStatus: nil) }
        history.serving("staging")
        for _ in 0..<5 { history.record(answered: at, duration: .milliseconds(1), cacheStatus: nil) }
        history.serving("development")
        history.record(answered: at, duration: .milliseconds(1), cacheStatus: nil)
        let now = origin + .seconds(10)
        #expect(history.series("development", now: now).rate[88] == 0.4)
        #expect(history.series("staging", now: now).rate[88] == 0.5)
        #expect(history.series("", now: now).rate[88] == 0.1)
    }
}

@Suite("TrafficHistory: what counts as a hit")
struct TrafficHistoryHitTests {
    @Test("RFC 9211 hits, with or without parameters after; never a forward", arguments: [
        ("veneer; hit", true), ("veneer; hit; ttl=59", true), ("veneer; fwd=miss; stored", false), ("veneer; fwd=stale; hitch", false),
        ("hit", false), ("", false),
    ])
    func hit(_ status: String, _ expected: Bool) {
        #expect(TrafficHistory.isHit(status) == expected)
    }
}
