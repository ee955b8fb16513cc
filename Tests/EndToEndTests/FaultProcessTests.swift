import Foundation
import Testing
import VeneerTestSupport

@Suite("fault as a real process")
struct FaultProcessTests {
    @Test("abort on one route and method; drop fails like an upstream that closes without answering, on a connection that stays open; latency_log outside logs both as failures")
    func abortAndDrop() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // /posts/99: an upstream that closes without a byte, the failure drop stands in for.
        let upstream = try await ScriptedUpstream.start { received in
            received.text.hasPrefix("GET /posts/99 ") ? .close : .reply(ScriptedUpstream.ok(#"{"id":1,"title":"t","body":"b"}"#))
        }
        defer { Task { await upstream.stop() } }
        try """
        environments:
          development:
            origin: { upstream: { url: "\(upstream.url)" } }
            chain:
              - latency_log: { file: \(directory)/latency.log }
              - fault:
                  abort: { status: 503, routes: ["/posts/{id}"], methods: [DELETE] }
                  allow_header: true
        """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        let check = try await VeneerProcess.run(["check", "--config", "veneer.yaml"], directory: directory)
        #expect(check.status == 0, "\(check.stderr)")

        let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
        defer { process.terminate() }
        let port = try await process.waitUntilReady()
        let aborted = try await RawHTTP.request(port: port, "DELETE", "/posts/1")
        #expect(aborted.status == 503 && aborted.errorCode == "fault_injected")
        #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").status == 200)
        #expect(upstream.received.count == 1, "the aborted DELETE never reached the upstream")

        let connection = try await RawConnection.connect(port: port)
        defer { connection.close() }
        try await connection.send("GET /posts/99 HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n")
        let real = try #require(try await connection.responses(1).last)
        try await connection.send("GET /posts/1 HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nVeneer-Fault: drop\r\n\r\n")
        let dropped = try #require(try await connection.responses(2).last)
        try await connection.send("GET /posts/1 HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n")
        let after = try #require(try await connection.responses(3).last)
        #expect(real.status == 502 && dropped.status == 502)
        #expect(real.errorCode == "upstream_unavailable" && dropped.errorCode == "upstream_unavailable")
        let message = { (response: RawResponse) in response.json?["message"] as? String ?? "" }
        // The very answer of the real failure (the upstream's address is for the daemon log only).
        #expect(message(real) == "The upstream closed the connection without answering.")
        #expect(message(dropped) == message(real))
        #expect(after.status == 200 && !connection.isClosed, "the caller's connection stays open")
        #expect(!upstream.received.contains { $0.text.lowercased().contains("veneer-fault") }, "the header never leaves Veneer")

        // latency_log's file is written by a thread of its own, in batches.
        let logged = { ((try? String(contentsOfFile: directory + "/latency.log", encoding: .utf8)) ?? "").split(separator: "\n") }
        try await eventually("the five requests are logged (\(logged().count) so far)") { logged().count >= 5 }
        let lines = logged()
        #expect(lines.contains { $0.contains(#""method":"DELETE""#) && $0.contains(#""status":503"#) })
        #expect(lines.filter { $0.contains(#""status":502"#) && $0.contains(#""error":"upstream_unavailable""#) }.count == 2)
    }

    @Test("Veneer-Fault with a delay past what nanoseconds hold answers 400, and the process serves on (it died of SIGILL)")
    func overflowingDelay() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try """
        environments:
          development:
            origin: { mock: { sample: true } }
            chain:
              - fault: { allow_header: true }
        """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
        defer { process.terminate() }
        let port = try await process.waitUntilReady()
        for delay in ["9300000000s", "9300000000000ms", "155000000m", "2600000h", "9223372036854775808s", "1e400s", "61s", "-1s"] {
            let answer = try await RawHTTP.request(port: port, "GET", "/posts/1", headers: [("Veneer-Fault", "delay=\(delay)")])
            #expect(answer.status == 400 && answer.errorCode == "bad_request", "delay=\(delay)")
            #expect(process.process.isRunning, "delay=\(delay) ended the process: \(process.stderr)")
        }
        #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").status == 200)
    }

    @Test("a cache outside a fault serves its stale copy under stale_if_error when Veneer-Fault asks for a 503 or a drop")
    func staleIfError() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await withTestUpstream({ _ in
            .json(#"{"id":1,"title":"t","body":"b"}"#, headers: [("Cache-Control", "max-age=0")])
        }) { (upstream: TestUpstream) async throws in
            try """
            environments:
              development:
                origin: { upstream: { url: "\(upstream.url)" } }
                chain:
                  - cache: { stale_if_error: 1h }
                  - fault: { allow_header: true }
            """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
            let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
            defer { process.terminate() }
            let port = try await process.waitUntilReady()
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").status == 200)
            for fault in ["status=503", "drop", "delay=10ms, status=500"] {
                let stale = try await RawHTTP.request(port: port, "GET", "/posts/1", headers: [("Veneer-Fault", fault)])
                #expect(stale.status == 200 && stale.text.contains(#""id":1"#), "\(fault)")
                #expect(stale.header("cache-status")?.contains("stale-if-error") == true, "\(fault): \(stale.header("cache-status") ?? "-")")
            }
            #expect(upstream.count == 1)
            let typo = try await RawHTTP.request(port: port, "GET", "/posts/2", headers: [("Veneer-Fault", "stauts=503")])
            #expect(typo.status == 400 && typo.errorCode == "bad_request")
        }
    }

    @Test("one caller's Veneer-Fault stays that caller's: its answer is not stored, nobody waits on its delay, a delay is bounded, and the header never reaches the upstream even without a fault decorator")
    func headerFaultStaysWithItsCaller() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await withTestUpstream({ _ in .json(#"{"id":1,"title":"t","body":"b"}"#) }) { (upstream: TestUpstream) async throws in
            try """
            environments:
              development:
                origin: { upstream: { url: "\(upstream.url)" } }
                chain:
                  - cache: { ttl: 1h }
                  - fault: { allow_header: true }
              plain:
                origin: { upstream: { url: "\(upstream.url)" } }
            """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
            let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
            defer { process.terminate() }
            let port = try await process.waitUntilReady()
            for status in [404, 501] {
                let faulted = try await RawHTTP.request(port: port, "GET", "/posts/\(status)", headers: [("Veneer-Fault", "status=\(status)")])
                #expect(faulted.status == status && faulted.header("Cache-Control") == "no-store")
                let next = try await RawHTTP.request(port: port, "GET", "/posts/\(status)")
                #expect(next.status == 200, "\(status): another caller gets the upstream's answer, not the stored fault")
            }
            // A long delay on one request: another request for the same URL does not wait for it.
            let slow = Task { try await RawHTTP.request(port: port, "GET", "/posts/41", headers: [("Veneer-Fault", "delay=30s")]) }
            // In flight: the gauge counts it and the scrape itself.
            try await eventually("the delayed request is in flight") {
                ((try? await RawHTTP.request(port: port, "GET", "/-/metrics").text) ?? "").contains("veneer_http_requests_in_flight 2")
            }
            let started = ContinuousClock.now
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/41").status == 200)
            // Far less than the delayed request's 30 s (seconds of slack for a loaded machine).
            #expect(ContinuousClock.now - started < .seconds(10), "not collapsed onto the delayed request")
            slow.cancel()
            let unbounded = try await RawHTTP.request(port: port, "GET", "/posts/42", headers: [("Veneer-Fault", "delay=1d")])
            #expect(unbounded.status == 400)
            #expect(!upstream.requests.contains { $0.header("veneer-fault") != nil })
            process.terminate()
            _ = await process.wait()

            let plain = try VeneerProcess(["run", "--config", "veneer.yaml", "-e", "plain", "--listen", "127.0.0.1:0"], directory: directory)
            defer { plain.terminate() }
            let plainPort = try await plain.waitUntilReady()
            #expect(try await RawHTTP.request(port: plainPort, "GET", "/posts/1", headers: [("Veneer-Fault", "status=503")]).status == 200)
            #expect(!upstream.requests.contains { $0.header("veneer-fault") != nil }, "no fault decorator: still not passed on")
        }
    }
}
