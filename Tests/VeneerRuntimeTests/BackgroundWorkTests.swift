import Foundation
import Synchronization
import Testing
import VeneerConfig
import VeneerCore
import VeneerRuntime
import VeneerTestSupport

/// Work a decorator does after its caller has the answer belongs to the chain generation it
/// started in; and the request fields addressed to decorators never reach the upstream.
@Suite("Background work and request directives", .timeLimit(.minutes(1)))
struct BackgroundWorkTests {
    @Test("a stale copy's refresh in the background (stale_while_revalidate) holds its generation: swapped out by a reload, it drains once the refresh ends")
    func revalidationHoldsTheGeneration() async throws {
        let clock = ManualClock()
        let refreshing = Signals<Void>()
        let gate = Latch()
        let asked = Atomic<Int>(0)
        try await withTestUpstream({ _ in
            // The second request is the refresh: it waits at the gate.
            if asked.add(1, ordering: .relaxed).newValue == 2 {
                refreshing.send(())
                await gate.wait()
            }
            return .json(#"{"id":1,"title":"t","body":"b"}"#, headers: [("Cache-Control", "max-age=1")])
        }) { upstream in
            let yaml = """
                environments:
                  development:
                    origin: { upstream: { url: "\(upstream.url)" } }
                    chain:
                      - cache: { stale_while_revalidate: 1h }
                """
            try await withVeneer(yaml: yaml, clock: clock) { veneer in
                #expect(try await veneer.request("GET", "/posts/1").header("Cache-Status")?.contains("stored") == true)
                clock.advance(by: .seconds(5))
                let stale = try await veneer.request("GET", "/posts/1")
                #expect(stale.header("Cache-Status")?.contains("stale-while-revalidate") == true, "answered at once, stale")
                _ = await refreshing.next()
                let old = veneer.chain.generation
                #expect((try? await veneer.instance.reload().get())?.number == 2)
                #expect(old.serving.requestsInFlight == 1 && !old.serving.isDrained, "the refresh still runs in generation 1")
                gate.open()
                await old.serving.drained()
                #expect(try await veneer.request("GET", "/posts/1").header("Cache-Status")?.hasPrefix("veneer; hit") == true,
                        "the refresh stored its answer")
            }
        }
    }

    @Test("Veneer-Fault, addressed to the fault decorator, never reaches the upstream, whether or not the chain has one")
    func directivesStayInside() async throws {
        try await withTestUpstream({ _ in .json("[]") }) { upstream in
            for chain in ["[]", "[{fault: {allow_header: true}}]", "[cache]"] {
                let yaml = "environments: {development: {origin: {upstream: {url: \"\(upstream.url)\"}}, chain: \(chain)}}"
                try await withVeneer(yaml: yaml) { veneer in
                    upstream.reset()
                    _ = try await veneer.request("GET", "/posts", headers: [("Veneer-Fault", "delay=1ms")])
                    #expect(upstream.requests.count == 1 && upstream.requests.allSatisfy { $0.header("Veneer-Fault") == nil }, "chain \(chain)")
                }
            }
        }
    }
}
