import Foundation
import HTTPTypes
import NIOCore
import Prometheus
import Testing
import VeneerCore
@testable import VeneerDecorators
import VeneerStores
import VeneerTestSupport

/// `block_list` in front of a cache (the shipped production order) passes the cache's hits on
/// without a task, and answers, refuses and learns as it does over a handler that only has
/// `handle`: the same answers and effects as the scenario run that way.
@Suite("block_list: immediate answers of the cache inside it")
struct BlockListImmediateTests {
    typealias Conformance = CapabilityConformanceTests
    typealias Step = Conformance.Step

    /// An inner handler without capabilities: block_list awaits it, as it did every request.
    struct HandleOnly: Handler {
        let inner: any Handler
        func handle(_ request: ProxyRequest) async throws -> ProxyResponse { try await inner.handle(request) }
    }

    /// The scripted inner handler's `/posts/7` is the learned signal (200, `ETag: "7"`,
    /// `{"id":7}`); `/posts/1`'s status is the signal's, but not its header.
    static let rules = "{deny: {methods: [DELETE], headers: {X-Account-Id: ['666']}, routes: [/posts/100000]}, "
        + #"learn: {status: 200, header: {ETag: '"7"'}, json: {id: '7'}, account_header: X-Account-Id}}"#

    static func account(_ value: String) -> HTTPFields { [HTTPField.Name("X-Account-Id")!: value] }

    static let scenario: [Step] = [
        Step(method: .get, target: "/posts/1", headers: account("a")),
        Step(method: .get, target: "/posts/1", headers: account("a")),
        Step(method: .delete, target: "/posts/1", headers: account("a")),
        Step(method: .get, target: "/posts/2", headers: account("1, 666")),
        // A miss that is the signal, then a hit that is: both learned.
        Step(method: .get, target: "/posts/7", headers: account("b")),
        Step(method: .get, target: "/posts/7", headers: account("c")),
        Step(method: .get, target: "/posts/1", headers: account("c")),
        Step(method: .get, target: "/posts/1", headers: account("b")),
        Step(method: .get, target: "/posts/100000", headers: account("a")),
        // A hit that is the signal for two accounts: neither is learned.
        Step(method: .get, target: "/posts/7", headers: account("d, e")),
        Step(method: .get, target: "/posts/1", headers: account("d")),
        Step(method: .get, target: "/posts/1", headers: account("a"), advance: .seconds(11)),
    ]

    enum Form { case immediate, handleOnlyInside }

    static func outcome(_ form: Form) async throws -> (outcome: Conformance.Outcome, immediate: Int) {
        let clock = ManualClock(start: Date(timeIntervalSince1970: 1_800_000_000))
        let registry = PrometheusCollectorRegistry()
        let metrics = PrometheusMetricsFactory(registry: registry)
        let inner = Conformance.ScriptedInner()
        let cache = CacheDecorator.make(inner: inner, options: CacheOptions(), clock: clock, metrics: metrics)
        let context = BuildContext(logger: quietLogger(), clock: clock, metrics: metrics, transports: TransportProviderStub(), stateDirectory: "/tmp",
                                   stores: SingleStore(store: MemoryStore()))
        let blocks = try await BlockListDecorator.factory.make(options: try blockListOptions(rules),
                                                               inner: form == .immediate ? cache : HandleOnly(inner: cache), context: context)
        let sink = CollectingSink()
        let logged = LatencyLogDecorator(inner: blocks, options: LatencyLogOptions(label: "0"), sink: sink, clock: clock, metrics: metrics)
        var immediate = 0
        let (answers, records) = await Conformance.run(scenario, clock: clock, traced: true) { request in
            do {
                switch logged.answerImmediately(request) {
                case .answer(let response):
                    immediate += 1
                    return .success(response)
                case .later(let rest): return .success(try await rest())
                }
            } catch {
                return .failure(error)
            }
        }
        let outcome = Conformance.Outcome(answers: answers, received: inner.log, metrics: Conformance.metricsText(registry), logLines: sink.lines,
                                          records: records)
        return (outcome, immediate)
    }

    @Test("hits pass without a task; refusals, learned blocks and answers are those of block_list awaiting every answer")
    func sameAsHandle() async throws {
        let (fast, immediate) = try await Self.outcome(.immediate)
        let (plain, awaited) = try await Self.outcome(.handleOnlyInside)
        #expect(awaited == 0)
        #expect(immediate == 2, "the hits of /posts/1 that no rule or block refuses")
        #expect(fast.answers == plain.answers)
        #expect(fast.received == plain.received)
        #expect(fast.metrics == plain.metrics)
        #expect(fast.logLines.map { $0.replacingOccurrences(of: #""duration_ms":[0-9.]+"#, with: "", options: .regularExpression) }
            == plain.logLines.map { $0.replacingOccurrences(of: #""duration_ms":[0-9.]+"#, with: "", options: .regularExpression) })
        #expect(fast.records == plain.records)
        // The scenario did what it says, so that agreeing means something.
        let refused = plain.answers.enumerated().filter { $0.element.hasPrefix("error ") }.map(\.offset)
        #expect(refused == [2, 3, 6, 7, 8])
        #expect(plain.answers[9].hasPrefix("200 ") && plain.answers[10].hasPrefix("200 ") && plain.answers[11].hasPrefix("200 "))
        #expect(plain.received.filter { $0.hasPrefix("GET /posts/7") }.count == 1, "the second /posts/7 was a hit")
    }
}
