import HTTPTypes
import NIOCore
import Testing
import VeneerConfig
import VeneerCore
@testable import VeneerDecorators
import VeneerTestSupport

/// Decodes fault options from YAML through the registry's factory.
func faultOptions(_ yaml: String) throws -> FaultOptions {
    var registry = Registry()
    registry.register(FaultDecorator.factory)
    registry.register(OriginFactory(name: "none", summary: "", options: [], decode: { _ in true }, make: { _, _ in RecordingHandler() }))
    let document = try ConfigDocument(source: ConfigSource(file: "t.yaml", text: "environments: {development: {origin: {none: {}}, chain: [{fault: \(yaml)}]}}"))
    let spec = try document.environment("development", registry: registry, variables: [:], workingDirectory: "/tmp")
    return try #require(spec.chain.first?.options as? FaultOptions)
}

func faultProblems(_ yaml: String) -> [String] {
    do {
        _ = try faultOptions(yaml)
        return []
    } catch let error as ConfigError {
        return error.diagnostics.map(\.description)
    } catch {
        return ["\(error)"]
    }
}

@Suite("fault")
struct FaultTests {
    let inner = RecordingHandler()

    func fault(_ yaml: String, clock: any VeneerClock = ManualClock()) throws -> FaultDecorator {
        let options = try faultOptions(yaml)
        return FaultDecorator(inner: inner, options: options, random: FaultRandom(seed: options.seed), clock: clock)
    }

    func request(_ method: HTTPRequest.Method = .get, _ route: ResourceRoute = .item(.posts, "1"), client: String = "127.0.0.1",
                 fault header: String? = nil) -> ProxyRequest {
        var headers: HTTPFields = [:]
        if let header { headers[.veneerFault] = header }
        return ProxyRequest(method: method, route: route, headers: headers, client: ClientAddress(client))
    }

    @Test("abort with a status answers it instead of the inner handler, as JSON, and notes it for the trace")
    func abortStatus() async throws {
        let decorator = try fault("{abort: {status: 503}}")
        let sent = request()
        let response = try await decorator.handle(sent)
        #expect(response.status.code == 503 && response.headers[.contentType] == "application/json")
        #expect(String(buffer: response.body).contains("\"error\":\"fault_injected\""))
        #expect(inner.count == 0)
        #expect(sent.record.entries == [.init(name: "fault", detail: "abort 503")])
    }

    @Test("drop throws exactly the error of an upstream that closes without answering")
    func drop() async throws {
        let decorator = try fault("{abort: {status: drop}}")
        await #expect(throws: ProxyError.upstreamClosedWithoutAnswer(nil)) { try await decorator.handle(request()) }
        #expect(ProxyError.upstreamClosedWithoutAnswer(nil).code == .upstreamUnavailable)
        #expect(ProxyError.upstreamClosedWithoutAnswer("api:80").message == "The upstream closed the connection without answering.")
        #expect(ProxyError.upstreamClosedWithoutAnswer("api:80").detail == "api:80 closed the connection without answering")
        #expect(inner.count == 0)
    }

    @Test("routes and methods limit a rule to the requests they name; the rest pass untouched")
    func scope() async throws {
        let decorator = try fault("{abort: {status: 500, routes: ['/posts/{id}'], methods: [delete, PUT]}}")
        #expect(try await decorator.handle(request(.delete, .item(.posts, "7"))).status.code == 500)
        #expect(try await decorator.handle(request(.put, .item(.posts, "7"))).status.code == 500)
        #expect(try await decorator.handle(request(.get, .item(.posts, "7"))).status.code == 200)
        #expect(try await decorator.handle(request(.delete, .list(.posts))).status.code == 200)
        #expect(inner.count == 2)
        let one = try fault("{abort: {status: 500, routes: [/posts/13]}}")
        #expect(try await one.handle(request(.get, .item(.posts, "13"))).status.code == 500)
        #expect(try await one.handle(request(.get, .item(.posts, "14"))).status.code == 200)
    }

    @Test("a percentage applies a rule to about that share of requests; the same seed gives the same run, another seed another")
    func percentAndSeed() throws {
        func run(_ seed: Int) throws -> [Bool] {
            let decorator = try fault("{abort: {status: 503, percent: 25}, seed: \(seed)}")
            return (0..<1000).map { _ in decorator.plan(for: request()).abort != nil }
        }
        let first = try run(7)
        #expect(first == (try run(7)))
        #expect(first != (try run(8)))
        let aborted = first.filter { $0 }.count
        #expect((180...320).contains(aborted), "\(aborted) of 1000 at 25%")
        let never = try fault("{abort: {status: 503, percent: 0}}")
        #expect((0..<100).allSatisfy { _ in never.plan(for: request()).abort == nil })
    }

    @Test("a fixed delay holds the request for that long on the build context's clock, then passes it on")
    func fixedDelay() async throws {
        let clock = ManualClock()
        let decorator = try fault("{delay: {duration: 2s}}", clock: clock)
        let sent = request()
        let task = Task { try await decorator.handle(sent) }
        while clock.sleeperCount == 0 { await Task.yield() }
        #expect(inner.count == 0)
        clock.advance(by: .milliseconds(1999))
        #expect(inner.count == 0 && clock.sleeperCount == 1)
        clock.advance(by: .milliseconds(1))
        #expect(try await task.value.status.code == 200)
        #expect(inner.count == 1)
        #expect(sent.record.entries.map(\.detail) == ["delay 2s"])
    }

    @Test("a delay range draws each delay evenly between its bounds, reproducibly with a seed")
    func delayRange() throws {
        let decorator = try fault("{delay: {duration: [100ms, 300ms]}, seed: 1}")
        let delays = (0..<200).compactMap { _ in decorator.plan(for: request()).delay }
        #expect(delays.count == 200)
        #expect(delays.allSatisfy { $0 >= .milliseconds(100) && $0 <= .milliseconds(300) })
        #expect(delays.contains { $0 < .milliseconds(150) } && delays.contains { $0 > .milliseconds(250) })
        let again = try fault("{delay: {duration: [100ms, 300ms]}, seed: 1}")
        #expect(delays == (0..<200).compactMap { _ in again.plan(for: request()).delay })
    }

    @Test("delay then abort: a delayed abort waits first")
    func delayThenAbort() async throws {
        let clock = ManualClock()
        let decorator = try fault("{delay: {duration: 1s}, abort: {status: 504}}", clock: clock)
        let task = Task { try await decorator.handle(request()) }
        while clock.sleeperCount == 0 { await Task.yield() }
        clock.advance(by: .seconds(1))
        #expect(try await task.value.status.code == 504)
    }

    @Test("Veneer-Fault from a loopback client, with allow_header, replaces the rules for that request")
    func header() async throws {
        let clock = ManualClock()
        let decorator = try fault("{allow_header: true}", clock: clock)
        #expect(try await decorator.handle(request(fault: "status=503")).status.code == 503)
        #expect(try await decorator.handle(request(client: "::1", fault: "status=429")).status.code == 429)
        await #expect(throws: ProxyError.upstreamClosedWithoutAnswer(nil)) { try await decorator.handle(request(fault: "drop")) }
        let task = Task { try await decorator.handle(request(fault: "delay=2s, status=502")) }
        while clock.sleeperCount == 0 { await Task.yield() }
        clock.advance(by: .seconds(2))
        #expect(try await task.value.status.code == 502)
        #expect(try await decorator.handle(request()).status.code == 200)
        #expect(inner.count == 1)
        let rules = try fault("{allow_header: true, abort: {status: 500}}")
        #expect(try await rules.handle(request(fault: "delay=0s")).status.code == 200, "the header's plan, not the rule's")
    }

    @Test("Veneer-Fault is ignored from other clients and without allow_header, and never passed on")
    func headerRefused() async throws {
        let allowed = try fault("{allow_header: true}")
        #expect(try await allowed.handle(request(client: "192.0.2.7", fault: "status=503")).status.code == 200)
        let closed = try fault("{delay: {duration: 0s}}")
        #expect(try await closed.handle(request(fault: "status=503")).status.code == 200)
        #expect(inner.count == 2)
        #expect(inner.requests.allSatisfy { $0.headers[.veneerFault] == nil })
    }

    @Test("a malformed or out-of-range Veneer-Fault is a 400, not a quiet pass nor a crash", arguments: [
        "status=200", "status=abc", "delay=soon", "boom", "", "status",
        // Each once ended the process: the delay overflowed its conversion to nanoseconds.
        "delay=9300000000s", "delay=9300000000000ms", "delay=155000000m", "delay=2600000h",
        // The header's bounds: 0s to 60s, 400 to 599; 2^63 seconds; negative, a huge exponent.
        "delay=61s", "delay=60001ms", "delay=60000000001ns", "delay=9223372036854775808s", "delay=99999999999999999999999999999999999s",
        "delay=-1s", "delay=1e400s", "delay=nan", "status=600", "status=399", "status=9223372036854775808", "status=-503", "status=5e2",
        "status=503.5",
    ])
    func malformedHeader(_ header: String) async throws {
        let decorator = try fault("{allow_header: true}")
        await #expect(throws: ProxyError.self) {
            do { _ = try await decorator.handle(request(fault: header)) } catch let error as ProxyError {
                #expect(error.code == .badRequest)
                throw error
            }
        }
        #expect(inner.count == 0)
    }

    @Test("Veneer-Fault at the edges of its bounds: 0s, 60s in any unit, fractions; 400 and 599")
    func headerEdges() throws {
        for (header, delay) in [("delay=0", Duration.zero), ("delay=0s", .zero), ("delay=60s", .seconds(60)), ("delay=1m", .seconds(60)),
                                ("delay=60000ms", .seconds(60)), ("delay=1.5s", .milliseconds(1500)), ("delay=0.5m", .seconds(30))] {
            #expect(try FaultPlan(header: header).delay == delay, "\(header)")
        }
        #expect(try FaultPlan(header: "status=400").abort == .status(400))
        #expect(try FaultPlan(header: "status=599, delay=1s") == FaultPlan(delay: .seconds(1), abort: .status(599)))
    }

    @Test("options decode with their defaults")
    func decoding() throws {
        let options = try faultOptions("{abort: {status: drop, percent: 12.5, methods: [GET]}, delay: {duration: 2s, routes: [/posts]}, seed: 42}")
        #expect(options.abort == .init(.drop, scope: .init(percent: 12.5, methods: ["GET"])))
        #expect(options.delay == .init(minimum: .seconds(2), scope: .init(routes: [.list("posts")])))
        #expect(options.seed == 42 && !options.allowHeader)
        let header = try faultOptions("{allow_header: true}")
        #expect(header.abort == nil && header.delay == nil && header.seed == nil && header.allowHeader)
    }

    @Test("bad options are configuration errors with line, column and key path")
    func validation() {
        #expect(faultProblems("{abort: {status: 200}}") == [
            "t.yaml:1:83: environments.development.chain[0].fault.abort.status: 200 is out of range (400...599)",
        ])
        #expect(faultProblems("{abort: {status: soon}}") == [
            #"t.yaml:1:83: environments.development.chain[0].fault.abort.status: "soon" is not a status from 400 to 599 or drop"#,
        ])
        #expect(faultProblems("{abort: {status: 503, percent: 150}}") == [
            "t.yaml:1:97: environments.development.chain[0].fault.abort.percent: 150 is out of range (0...100)",
        ])
        #expect(faultProblems("{delay: {duration: [2s, 1s]}}") == [
            "t.yaml:1:85: environments.development.chain[0].fault.delay.duration: the range must go from the shorter to the longer delay",
        ])
        #expect(faultProblems("{delay: {duraton: 1s}}").contains { $0.contains("unknown key 'duraton' (did you mean 'duration'?)") })
        #expect(faultProblems("{abort: {status: 503, methods: [FETCH], routes: [posts]}}").count == 2)
        #expect(faultProblems("{seed: -1, allow_header: true}").first?.contains("seed: must be a whole number") == true)
        #expect(faultProblems("{}").first?.contains("give abort, delay or allow_header: true") == true)
        #expect(faultProblems("{abrot: {status: 503}}").contains { $0.contains("unknown key 'abrot' (did you mean 'abort'?)") })
    }
}
