import Foundation
import Synchronization
import Testing
import VeneerTestSupport

/// Access tokens the upstream has seen: it takes each once, so that every request makes
/// Veneer refresh (rotations as frequent as Veneer can make them).
final class OneUseTokens: Sendable {
    private let seen = Mutex<Set<String>>([])
    func firstUse(_ token: String) -> Bool { seen.withLock { $0.insert(token).inserted } }
}

@Suite("auth_refresh under kill -9 (the real binary)", .serialized)
struct AuthRefreshKillTests {
    @Test("kill -9 at least 100 times during back-to-back rotations: every revocation is inside the documented window (the saved token was in flight), and no temporary file stays")
    func killNine() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "rt-0\n".write(toFile: directory + "/refresh-token", atomically: true, encoding: .utf8)
        try "s3cret".write(toFile: directory + "/client-secret", atomically: true, encoding: .utf8)
        let tokens = try await TestTokenServer.start()
        let used = OneUseTokens()
        try await withTestUpstream({ request in
            guard let header = request.header("authorization"), used.firstUse(header) else { return .json(#"{"error":"invalid_token"}"#, status: 401) }
            return tokens.protectedReply(request)
        }) { (upstream: TestUpstream) async throws in
            try """
                state_dir: \(directory)/state
                environments:
                  development:
                    origin: { upstream: { url: "\(upstream.url)" } }
                    chain:
                      - auth_refresh:
                          token_url: \(tokens.url)
                          client_id: veneer
                          client_secret_file: \(directory)/client-secret
                          refresh_token_file: \(directory)/refresh-token
                """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
            let folder = directory + "/state/auth_refresh"
            func saved() -> [String: Any]? {
                guard let name = try? FileManager.default.contentsOfDirectory(atPath: folder).first(where: { $0.hasSuffix(".json") }),
                      let data = FileManager.default.contents(atPath: folder + "/" + name) else { return nil }
                return try? JSONSerialization.jsonObject(with: data) as? [String: Any]
            }

            var revocations = 0
            var outsideWindow: [String] = []
            var windows: [Duration] = []
            var savedAfter: [Int] = []
            var family = 0
            var markedBeforeStart = false
            // Every refresh token the saved state marked in flight when a process was killed.
            var inFlightAtKill: Set<String> = []
            var lastMarked: String?
            // A hundred kills, and more while rotations are too few to show anything (a loaded
            // machine makes fewer in the same moments).
            var round = 0
            while round < 100 || (tokens.refreshes <= 200 && round < 300) {
                defer { round += 1 }
                let reusesBefore = tokens.reuses
                let presentedBefore = tokens.presented.count
                let veneer = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
                let port = try await veneer.waitUntilReady()
                // Two callers, each request a refresh (the upstream takes every token once).
                let drivers = (0..<2).map { _ in
                    Task {
                        while !Task.isCancelled { _ = try? await RawHTTP.request(port: port, "GET", "/posts/1") }
                    }
                }
                // Deliberate: the kill falls at a random moment of the refreshes.
                try await Task.sleep(for: .milliseconds(Int.random(in: 40...200)))
                veneer.signal(SIGKILL)
                let killedAt = ContinuousClock.now
                for driver in drivers { driver.cancel() }
                _ = await veneer.wait()
                for line in veneer.stderr.split(separator: "\n") {
                    if let range = line.range(of: #"saved_after_us=\d+"#, options: .regularExpression) {
                        savedAfter.append(Int(line[range].dropFirst("saved_after_us=".count)) ?? 0)
                    }
                }

                let familyStart = family == 0 ? "rt-0" : "rt-family-\(family)"
                if let current = tokens.currentRefreshToken(inFamilyOf: familyStart), let issued = tokens.rotatedAt(current),
                   saved()?["refresh_token"] as? String != current, issued < killedAt {
                    // Killed between the endpoint's rotation and the save: the documented window.
                    windows.append(killedAt - issued)
                }
                if tokens.reuses > reusesBefore {
                    revocations += 1
                    // A revocation may only come from presenting a token that was in flight when a
                    // process was killed: most often the next start's first refresh, but the
                    // endpoint (on the test's loaded event loops) may read the killed process's own
                    // request later than that, in a later round (once: a round whose start found no
                    // mark). The reused tokens, not the round, tell it.
                    let reused = tokens.reusedTokens.dropFirst(reusesBefore)
                    var inWindow = reused.allSatisfy { inFlightAtKill.contains($0) } && tokens.presented.count > presentedBefore
                    if let lastMarked, reused.contains(lastMarked) {
                        // This start presented the token marked at the last kill: it said so.
                        inWindow = inWindow && veneer.stderr.contains("the saved refresh token was in flight")
                    }
                    if !inWindow { outsideWindow.append("round \(round): reused \(Array(reused)), in flight at kills \(inFlightAtKill.sorted()): \(veneer.stderr.suffix(2000))") }
                    // An operator issues a new refresh token; the next start takes it.
                    family += 1
                    try "rt-family-\(family)\n".write(toFile: directory + "/refresh-token", atomically: true, encoding: .utf8)
                    tokens.issueNewFamily("rt-family-\(family)")
                }
                markedBeforeStart = saved()?["in_flight_since"] != nil
                lastMarked = markedBeforeStart ? saved()?["refresh_token"] as? String : nil
                if let lastMarked { inFlightAtKill.insert(lastMarked) }
            }
            // A last, graceful run: no temporary file stays, whatever the kills left.
            let last = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
            let port = try await last.waitUntilReady()
            let reusesBefore = tokens.reuses
            var served = false
            // Served, or refused because the token it presented first had been revoked (below).
            try await eventually("the last start serves, or its first refresh revoked the family") {
                served = (try? await RawHTTP.request(port: port, "GET", "/posts/1").status) == 200
                return served || tokens.reuses > reusesBefore
            }
            if !served, markedBeforeStart, tokens.reuses == reusesBefore + 1 {
                // The last kill fell in the window too: its revocation is the documented one.
                // The operator's new refresh token (the file, taken within a second) resumes.
                family += 1
                try "rt-family-\(family)\n".write(toFile: directory + "/refresh-token", atomically: true, encoding: .utf8)
                tokens.issueNewFamily("rt-family-\(family)")
                try await eventually("the new family serves") {
                    served = (try? await RawHTTP.request(port: port, "GET", "/posts/1").status) == 200
                    return served
                }
            }
            #expect(served, "the last start did not serve: \(last.stderr.suffix(3000))")
            last.signal(SIGTERM)
            #expect(await last.wait() == 0)
            let files = try FileManager.default.contentsOfDirectory(atPath: folder)
            #expect(files.filter { $0.contains(".tmp") }.isEmpty, "\(files)")

            #expect(outsideWindow.isEmpty, "revocations outside the window:\n\(outsideWindow.joined(separator: "\n"))")
            #expect(tokens.refreshes > 200, "rotations were frequent: \(tokens.refreshes)")
            savedAfter.sort()
            windows.sort()
            let percentile = { (values: [Int], p: Double) in values.isEmpty ? 0 : values[min(values.count - 1, Int(Double(values.count) * p))] }
            print("""
                kill -9 x\(round): \(tokens.refreshes) rotations, \(revocations) revocations (\(outsideWindow.count) outside the window), \
                kills inside the window: \(windows.count) (largest \(windows.last.map { "\($0)" } ?? "-")); \
                answer-to-durable-save: p50 \(percentile(savedAfter, 0.5)) us, p99 \(percentile(savedAfter, 0.99)) us, max \(savedAfter.last ?? 0) us over \(savedAfter.count) saves
                """)
        }
        await tokens.stop()
    }
}
