import Foundation
import Testing
import VeneerTestSupport

/// A token endpoint that fails once and recovers (issue 32): Veneer retries by itself on the
/// README's backoff, health follows the endpoint, and nothing speaks of a crash that did not
/// happen. The real binary, a real token endpoint.
@Suite("auth_refresh recovers from a failing token endpoint (the real binary)", .serialized)
struct AuthRefreshRecoveryTests {
    static let crashWarning = "the saved refresh token was in flight when Veneer last stopped"

    @Test("one 500 to the refresh a 401 set off: retried by itself within the backoff (1 s), health back to 200, no false crash warning")
    func fiveHundredAfterA401() async throws {
        try await withFamilyRig { rig in
            let (veneer, port) = try await rig.start()
            defer { veneer.terminate() }
            #expect(try await rig.get(port).status == 200)
            #expect(rig.tokens.presented == ["rt-0"])

            // The upstream refuses the access token, whose expiry is far off; the endpoint fails once.
            rig.refused.insert("at-1")
            rig.tokens.update {
                $0.failWith = 500
                $0.failures = 1
                // Veneer's retry (within 1 s) is answered once the test has seen health speak of
                // the failure: a loaded run asked after the retry had cleared it.
                $0.holdAfterFailures = true
            }
            let failed = try await rig.get(port)
            #expect(failed.status == 502, "\(failed.status) \(failed.text)")
            #expect(await rig.problems(port).contains { $0.contains("token endpoint unavailable") })
            rig.tokens.release()

            // No caller asks: the retry is Veneer's own.
            var left: [String] = []
            try await eventually("health is clear (it says \(left))") {
                left = await rig.problems(port)
                return left.isEmpty
            }
            // Timed by the endpoint: from the failed refresh to Veneer's retry of it (the first
            // backoff is 0.5-1 s; 2.5 s leaves a loaded run's timers slack, 1.5 s was missed by
            // 150 ms once, and still tells it from a retry a caller sets off, or none).
            let arrivals = rig.tokens.arrivals
            #expect(arrivals.count == 3 && arrivals[2] - arrivals[1] < .milliseconds(2500),
                    "within the first backoff (at most 1 s): \(arrivals.count == 3 ? "\(arrivals[2] - arrivals[1])" : "\(arrivals.count) requests")")
            #expect(rig.tokens.presented == ["rt-0", "rt-1", "rt-1"], "the token the failure proved unused, again")
            #expect(rig.tokens.refreshes == 2)
            #expect(try await rig.get(port).status == 200)
            #expect(rig.tokens.reuses == 0)
            #expect(!veneer.stderr.contains(Self.crashWarning), "Veneer never stopped")
            #expect(rig.saved()?["in_flight_since"] == nil, "the failure cleared its in-flight mark")

            // And after a restart there is nothing to warn about either.
            veneer.signal(SIGTERM)
            #expect(await veneer.wait() == 0)
            let (again, _) = try await rig.start()
            defer { again.terminate() }
            #expect(!again.stderr.contains(Self.crashWarning))
        }
    }

    @Test("a refresh the endpoint answers with 500 leaves no in-flight mark, so a restart during the backoff does not warn of a crash")
    func failureClearsTheMark() async throws {
        var settings = TestTokenServer.Settings()
        settings.failWith = 503
        try await withFamilyRig(settings) { rig in
            let (veneer, port) = try await rig.start()
            try await eventually("health says: token endpoint unavailable") { await rig.problems(port).contains { $0.contains("token endpoint unavailable") } }
            try await eventually("the saved state has no in-flight mark") { rig.saved() != nil && rig.saved()?["in_flight_since"] == nil }
            veneer.signal(SIGTERM)
            #expect(await veneer.wait() == 0)
            rig.tokens.update { $0.failWith = nil }
            let (again, againPort) = try await rig.start()
            defer { again.terminate() }
            #expect(try await rig.get(againPort).status == 200)
            #expect(!again.stderr.contains(Self.crashWarning), "\(again.stderr)")
            #expect(rig.tokens.reuses == 0)
        }
    }

    @Test("a slow endpoint: health says since when the request is outstanding and until when it is awaited, never \"for 0s or more\"")
    func slowEndpointMessage() async throws {
        var settings = TestTokenServer.Settings()
        // The endpoint's answer is held until the test has read health: the window in which
        // health must speak of the outstanding request is the test's, not a timer's (a 1.5 s
        // delay was not wide enough: CI once asked after the answer; 8 s was wide, not certain).
        settings.hold = true
        try await withFamilyRig(settings, options: ["timeout: 300ms"]) { rig in
            let (veneer, port) = try await rig.start()
            defer { veneer.terminate() }
            #expect(try await rig.get(port).status == 504)
            var seen: [String] = []
            try await eventually("health speaks of the outstanding request (it says \(seen))") {
                seen = await rig.problems(port)
                return seen.contains { $0.contains("has not answered") }
            }
            let problem = try #require(seen.first { $0.contains("has not answered") })
            #expect(!problem.contains("0s or more"), "\(problem)")
            #expect(problem.contains("within timeout (300ms)"), "\(problem)")
            #expect(problem.contains("waits for its answer until"), "\(problem)")
            rig.tokens.release()
            try await eventually("health is clear once the refresh is answered") { await rig.problems(port).isEmpty }
        }
    }
}
