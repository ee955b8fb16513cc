import Foundation
import HTTPTypes
import NIOCore
import NIOPosix
import Prometheus
import Synchronization
import Testing
@testable import VeneerCore
@testable import VeneerDecorators
import VeneerTestSupport

/// What the decorators that need a body's bytes do with one that streams (``BodyStream``):
/// the cache keeps a copy while it passes, up to max_entry_size; record writes its entry at the
/// body's end, the body left out when over max_body; block_list reads it whole only to match a
/// signal's json. The answer itself is never delayed nor cut.
@Suite("decorators with streamed bodies")
struct StreamedBodyDecoratorTests {
    static let loop = MultiThreadedEventLoopGroup.singleton.next()

    /// A stream of `parts`, of unknown length unless `declared`, fed on the loop as it is read.
    static func stream(_ parts: [String], declared: Bool = false) -> BodyStream {
        let total = parts.reduce(0) { $0 + $1.utf8.count }
        let stream = BodyStream(eventLoop: loop, expectedLength: declared ? total : nil, source: nil)
        loop.execute {
            for part in parts { _ = stream.yield(ByteBuffer(string: part)) }
            stream.finish(nil)
        }
        return stream
    }

    /// An inner handler answering 200 with a streamed body of `parts`, counting its calls.
    static func inner(_ parts: [String], status: HTTPResponse.Status = .ok, headers: ProxyHeaders = [.cacheControl: "max-age=60"],
                      declared: Bool = false) -> RecordingHandler {
        RecordingHandler { _ in ProxyResponse(status: status, headers: headers, stream: stream(parts, declared: declared)) }
    }

    /// Reads the body whole, as the edge would write it.
    static func drain(_ response: ProxyResponse) async throws -> String {
        String(buffer: try await response.collected(upTo: .max).body)
    }

    @Test("cache: a streamed answer under max_entry_size passes, and is stored at its end: the next request is a hit")
    func cacheStores() async throws {
        let inner = Self.inner(["hello, ", "world"])
        let cache = CacheDecorator.make(inner: inner, options: CacheOptions(), metrics: PrometheusMetricsFactory(registry: PrometheusCollectorRegistry()))
        let first = try await cache.handle(.getPost(1))
        #expect(first.isStreamed, "passed as it comes")
        #expect(try await Self.drain(first) == "hello, world")
        let second = try await cache.handle(.getPost(1))
        #expect(second.cacheStatus.hasPrefix("veneer; hit"), "\(second.cacheStatus)")
        #expect(String(buffer: second.body) == "hello, world" && inner.count == 1)
    }

    @Test("cache: a streamed answer over max_entry_size passes whole, and its copy is dropped")
    func cacheDropsLarge() async throws {
        let inner = Self.inner(["0123456789", "0123456789"])
        var options = CacheOptions()
        options.maxEntrySize = 15
        let cache = CacheDecorator.make(inner: inner, options: options, metrics: PrometheusMetricsFactory(registry: PrometheusCollectorRegistry()))
        #expect(try await Self.drain(try await cache.handle(.getPost(1))) == "01234567890123456789", "not cut")
        _ = try await Self.drain(try await cache.handle(.getPost(1)))
        #expect(inner.count == 2, "nothing was kept")
        let declared = Self.inner(["0123456789", "0123456789"], declared: true)
        let other = CacheDecorator.make(inner: declared, options: options, metrics: PrometheusMetricsFactory(registry: PrometheusCollectorRegistry()))
        #expect(try await Self.drain(try await other.handle(.getPost(1))).utf8.count == 20, "a declared length over the limit is not even copied")
    }

    @Test("cache: the copy of a streamed answer takes its share of limits.buffered; with no room it is dropped, the answer passes whole")
    func cacheCopyOverBudget() async throws {
        let inner = Self.inner(["0123456789", "0123456789"])
        var cache = CacheDecorator.make(inner: inner, options: CacheOptions(), metrics: PrometheusMetricsFactory(registry: PrometheusCollectorRegistry()))
        cache.buffers = BufferBudget(limit: 15)
        #expect(try await Self.drain(try await cache.handle(.getPost(1))) == "01234567890123456789", "not cut, not delayed")
        #expect(cache.buffers.inUse == 0 && cache.buffers.peak == 10, "its share taken while it grew, given back once dropped")
        let second = try await cache.handle(.getPost(1))
        #expect(!second.cacheStatus.hasPrefix("veneer; hit"), "the copy was dropped: \(second.cacheStatus)")
        #expect(try await Self.drain(second) == "01234567890123456789" && inner.count == 2)
        cache.buffers = BufferBudget(limit: 100)
        _ = try await Self.drain(try await cache.handle(.getPost(2)))
        #expect(cache.buffers.peak == 20 && cache.buffers.inUse == 0, "a copy that fits takes its share until it is stored")
    }

    @Test("cache: a streamed answer cut on its way (the client left) is not stored")
    func cacheDropsCut() async throws {
        let inner = RecordingHandler { _ in
            ProxyResponse(status: .ok, headers: [.cacheControl: "max-age=60"],
                          stream: BodyStream(eventLoop: Self.loop, expectedLength: nil, source: nil))
        }
        let cache = CacheDecorator.make(inner: inner, options: CacheOptions(), metrics: PrometheusMetricsFactory(registry: PrometheusCollectorRegistry()))
        let first = try await cache.handle(.getPost(1))
        first.discardBody()
        let second = try await cache.handle(.getPost(1))
        #expect(!second.cacheStatus.contains("hit") && inner.count == 2)
        second.discardBody()
    }

    @Test("cache: a background refresh (stale-while-revalidate) whose answer streams reads it, and stores it at its end")
    func cacheRefreshInBackground() async throws {
        let version = Mutex(0)
        let inner = RecordingHandler { _ in
            let next = version.withLock { $0 += 1; return $0 }
            return ProxyResponse(status: .ok, headers: [.cacheControl: "max-age=10"], stream: Self.stream(["v\(next)"]))
        }
        var options = CacheOptions()
        options.staleWhileRevalidate = .seconds(60)
        let clock = ManualClock()
        let cache = CacheDecorator.make(inner: inner, options: options, clock: clock, metrics: PrometheusMetricsFactory(registry: PrometheusCollectorRegistry()))
        #expect(try await Self.drain(try await cache.handle(.getPost(1))) == "v1")
        clock.advance(by: .seconds(20))
        let stale = try await cache.handle(.getPost(1))
        #expect(String(buffer: stale.body) == "v1" && stale.cacheStatus.contains("detail=stale-while-revalidate"), "\(stale.cacheStatus)")
        try await eventually("the refresh's answer was read and stored") {
            String(buffer: try await cache.handle(.getPost(1)).body) == "v2"
        }
    }

    @Test("record: a streamed body is written at its end; over max_body it is left out and its size noted")
    func record() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/out.har"
        let inner = RecordingHandler { request in
            ProxyResponse(status: .ok, headers: [.contentType: "text/plain"],
                          stream: Self.stream(request.route.id == "1" ? ["short ", "body"] : [String(repeating: "x", count: 800), String(repeating: "y", count: 800)]))
        }
        let options = RecordOptions(file: file, maxBody: 1024)
        let record = RecordDecorator(inner: inner, options: options,
                                     writer: try HARWriter(path: options.file, maxFileSize: options.maxFileSize, keep: options.keep),
                                     clock: ManualClock(), logger: quietLogger())
        let first = try await record.handle(.getPost(1))
        let before = (try? String(contentsOfFile: file, encoding: .utf8)) ?? ""
        #expect(!before.contains("short"), "nothing written before the body has passed")
        #expect(try await Self.drain(first) == "short body")
        #expect(try await Self.drain(try await record.handle(.getPost(2))).utf8.count == 1600, "the answer is not cut")
        try await eventually("both entries written") { (try? String(contentsOfFile: file, encoding: .utf8))?.contains("1600") == true }
        let data = try #require(FileManager.default.contents(atPath: file))
        let log = try #require((try JSONSerialization.jsonObject(with: data) as? [String: Any])?["log"] as? [String: Any])
        let contents = try #require(log["entries"] as? [[String: Any]]).map { ($0["response"] as? [String: Any])?["content"] as? [String: Any] ?? [:] }
        #expect(contents.first?["text"] as? String == "short body")
        #expect(contents.last?["_bodyOmitted"] as? Bool == true && contents.last?["size"] as? Int == 1600)
    }

    @Test("record: the copy of a streamed body takes its share of limits.buffered; with no room the body is left out, and said so")
    func recordOverBudget() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/out.har"
        let inner = RecordingHandler { _ in
            ProxyResponse(status: .ok, headers: [.contentType: "text/plain"], stream: Self.stream([String(repeating: "x", count: 600), String(repeating: "y", count: 600)]))
        }
        let options = RecordOptions(file: file, maxBody: 4096)
        var record = RecordDecorator(inner: inner, options: options,
                                     writer: try HARWriter(path: options.file, maxFileSize: options.maxFileSize, keep: options.keep),
                                     clock: ManualClock(), logger: quietLogger())
        record.buffers = BufferBudget(limit: 1000)
        #expect(try await Self.drain(try await record.handle(.getPost(1))).utf8.count == 1200, "the answer is not cut")
        try await eventually("the entry written") { (try? String(contentsOfFile: file, encoding: .utf8))?.contains("limits.buffered") == true }
        #expect(record.buffers.inUse == 0 && record.buffers.peak == 600)
    }

    @Test("block_list: a streamed answer whose head is the signal is read whole to match its json; any other passes as a stream")
    func blockListSignal() async throws {
        let rules = "{learn: {status: 403, json: {error: account_blocked}, account_header: X-Account}}"
        let blocked = Self.inner([#"{"error":"#, #""account_blocked"}"#], status: .forbidden, headers: [:])
        let decorator = try await blockList(rules, inner: blocked)
        var request = ProxyRequest.getPost(1)
        request.headers[HTTPField.Name("X-Account")!] = "acme"
        let answer = try await decorator.handle(request)
        #expect(!answer.isStreamed && String(buffer: answer.body) == #"{"error":"account_blocked"}"#)
        await #expect(throws: ProxyError.self, "the signal was learned: the account is blocked") { try await decorator.handle(request) }
        let passing = try await blockList(rules, inner: Self.inner(["a", "b"]))
        #expect(try await passing.handle(request).isStreamed, "a 200 is not the signal: it streams on")
    }

    @Test("a body collected whole over its limit is a 502 (upstream_unavailable), as a buffered answer over response_body")
    func collectedOverLimit() async throws {
        let response = ProxyResponse(status: .ok, stream: Self.stream(["0123456789", "0123456789"]))
        await #expect(throws: ProxyError.self) { try await response.collected(upTo: 15) }
        let declared = ProxyResponse(status: .ok, stream: Self.stream(["0123456789", "0123456789"], declared: true))
        do {
            _ = try await declared.collected(upTo: 15)
            Issue.record("collected over the limit")
        } catch let error as ProxyError {
            #expect(error.code == .upstreamUnavailable && error.status == .badGateway)
        }
    }
}
