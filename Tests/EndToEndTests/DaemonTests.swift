import Foundation
import Synchronization
import Testing
import VeneerTestSupport

@Suite("Veneer as a daemon: sd_notify, reload, drain")
struct DaemonTests {
    @Test("READY once listening, STATUS, RELOADING then READY around a reload, WATCHDOG pings, STOPPING on shutdown")
    func notifyProtocol() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let socket = try NotifySocket(directory: directory)
        try "environments: {development: {origin: {mock: {}}, chain: [latency_log]}}".write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory,
                                        environment: ["NOTIFY_SOCKET": socket.path, "WATCHDOG_USEC": "400000"])
        defer { process.terminate() }
        let port = try await process.waitUntilReady()
        try await eventually("READY=1 is sent") { socket.messages.contains { $0.contains("READY=1") } }
        let ready = try #require(socket.messages.first { $0.contains("READY=1") })
        #expect(ready.contains("STATUS=serving development"))
        #expect(ready.contains("latency_log -> mock (generation 1)"))
        // The listener accepted connections before READY was sent.
        #expect(try await RawHTTP.request(port: port, "GET", "/-/health").status == 200)
        try await eventually("a WATCHDOG=1 ping") { socket.messages.contains("WATCHDOG=1") }
        let firstPing = ContinuousClock.now
        try await eventually("two more pings") { socket.messages.filter { $0 == "WATCHDOG=1" }.count >= 3 }
        // Every 200 ms (half of WATCHDOG_USEC): 400 ms for two more; the bound leaves a loaded machine slack.
        #expect(ContinuousClock.now - firstPing < .seconds(2), "pings every 200 ms")

        process.signal(SIGHUP)
        try await eventually("the reload is announced") { socket.messages.contains { $0.contains("generation 2") } }
        let messages = socket.messages
        let reloading = try #require(messages.firstIndex { $0.hasPrefix("RELOADING=1") })
        #expect(messages[reloading].contains("MONOTONIC_USEC="))
        let readyAgain = try #require(messages.lastIndex { $0.contains("READY=1") })
        #expect(readyAgain > reloading)

        try "environments: {development: {origin: {mock: {}}, chain: [latncy_log]}}".write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        process.signal(SIGHUP)
        try await eventually("the failed reload is announced") {
            socket.messages.contains { $0.contains("STATUS=reload failed (1 problem") && $0.contains("unknown decorator 'latncy_log'") }
        }
        #expect(try await RawHTTP.request(port: port, "GET", "/posts").status == 200)

        process.signal(SIGTERM)
        let status = await process.wait()
        #expect(status == 0, "\(process.stderr.suffix(4000))")
        #expect(socket.messages.contains { $0.hasPrefix("STOPPING=1") }, "\(socket.messages.suffix(10))")
    }

    @Test("without NOTIFY_SOCKET nothing is sent and nothing fails")
    func silent() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let process = try VeneerProcess(["run", "--listen", "127.0.0.1:0"], directory: directory, environment: ["WATCHDOG_USEC": "100000"])
        defer { process.terminate() }
        let port = try await process.waitUntilReady()
        #expect(try await RawHTTP.request(port: port, "GET", "/posts").status == 200)
        process.signal(SIGTERM)
        #expect(await process.wait() == 0)
    }

    @Test("reloads under concurrent load drop zero requests")
    func reloadUnderLoad() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let configs = [
            "environments: {development: {origin: {mock: {}}, chain: [{cache: {ttl: 1s}}]}}",
            "environments: {development: {origin: {mock: {}}, chain: [latency_log, {cache: {ttl: 1s}}]}}",
        ]
        try configs[0].write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
        defer { process.terminate() }
        let port = try await process.waitUntilReady()
        let load = LoadCounters()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<64 {
                group.addTask {
                    while !load.stopped {
                        let target = worker % 2 == 0 ? "/posts" : "/posts/\(worker)"
                        let status = (try? await RawHTTP.request(port: port, "GET", target).status) ?? 0
                        load.record(ok: status == 200 || status == 404)
                    }
                }
            }
            var answeredPerRound: [Int] = []
            for round in 0..<6 {
                // At least 300 ms between reloads, and longer until requests have been answered
                // since the last one (a busy test run can take a while to get 64 clients going).
                let before = load.totals.0
                try await Task.sleep(for: .milliseconds(300))  // deliberate: reloads at least 300 ms apart
                try await eventually("requests are answered since the last reload") { load.totals.0 > before }
                answeredPerRound.append(load.totals.0 - before)
                try configs[round % 2 == 0 ? 1 : 0].write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
                process.signal(SIGHUP)
            }
            let afterLast = load.totals.0
            try await eventually("requests are answered after the last reload") { load.totals.0 > afterLast + 64 }
            load.stop()
            try await group.waitForAll()
            // Requests were being answered between every pair of reloads, not only before or after.
            #expect(answeredPerRound.allSatisfy { $0 > 0 }, "\(answeredPerRound)")
        }
        let (ok, failed) = load.totals
        #expect(failed == 0)
        #expect(ok > 0)
        #expect(process.stderr.components(separatedBy: "configuration reloaded").count - 1 == 6)
    }

    @Test("SIGTERM stops accepting, lets the request in flight finish, and exits 0")
    func drain() async throws {
        // The upstream holds the request until the test lets it go: in flight for as long as it takes.
        let release = Signals<Void>()
        try await withTestUpstream({ _ in
            _ = await release.next()
            return .json(#"{"id":1,"title":"t","body":"b"}"#)
        }) { (upstream: TestUpstream) async throws in
            let directory = try temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            try "environments: {development: {origin: {upstream: {url: \"\(upstream.url)\"}}}}".write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
            let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
            defer { process.terminate() }
            let port = try await process.waitUntilReady()
            async let slow = RawHTTP.request(port: port, "GET", "/posts/1")
            try await eventually("the request is in flight") { upstream.count == 1 }
            process.signal(SIGTERM)
            try await eventually("no new connections once draining") { (try? await RawHTTP.request(port: port, "GET", "/-/health")) == nil }
            #expect(process.process.isRunning, "the listener closed while the request in flight still ran")
            release.send(())
            #expect(try await slow.status == 200)
            #expect(await process.wait() == 0)
        }
    }

    @Test("drain_timeout bounds how long shutdown waits for a request in flight")
    func drainTimeout() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "environments: {development: {origin: {mock: {latency: 30s}}, drain_timeout: 500ms}}".write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
        defer { process.terminate() }
        let port = try await process.waitUntilReady()
        let slow = Task { try? await RawHTTP.request(port: port, "GET", "/posts") }
        try await eventually("the slow request is in flight") {
            ((try? await RawHTTP.request(port: port, "GET", "/-/metrics").text) ?? "").contains("veneer_http_requests_in_flight 2")
        }
        let start = ContinuousClock.now
        process.signal(SIGTERM)
        let status = await process.wait(timeout: .seconds(15))
        #expect(ContinuousClock.now - start < .seconds(8))
        #expect(status == 0)
        slow.cancel()
    }
}

extension DaemonTests {
    @Test("a request still in the chain when drain_timeout runs out gets 503 shutting_down, and each request cut is logged (daemon log and access log)")
    func drainTimeoutCuts() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try """
            environments:
              development:
                origin: { mock: { latency: 30s } }
                drain_timeout: 500ms
                access_log: access.log
            """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
        defer { process.terminate() }
        let port = try await process.waitUntilReady()
        let connection = try await RawConnection.connect(port: port)
        defer { connection.close() }
        // Two pipelined requests: the first is in the chain, the second waits behind it.
        try await connection.send("GET /posts/1?page=2 HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nX-Request-Id: cut-1\r\n\r\n"
            + "DELETE /posts/2 HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nX-Request-Id: cut-2\r\n\r\n")
        // The first is in the chain: the in-flight gauge counts it (and the scrape itself).
        try await eventually("the first request is in the chain") {
            ((try? await RawHTTP.request(port: port, "GET", "/-/metrics").text) ?? "").contains("veneer_http_requests_in_flight 2")
        }
        process.signal(SIGTERM)
        let answer = try #require(try await connection.responses(1, timeout: .seconds(10)).first)
        #expect(answer.status == 503 && answer.errorCode == "shutting_down")
        #expect(answer.header("X-Request-Id") == "cut-1")
        // Connection: close (the test's parser drops hop-by-hop fields): the connection ends.
        try await connection.waitForClose(timeout: .seconds(10))
        #expect(await process.wait(timeout: .seconds(15)) == 0)

        let daemon = process.stderr
        let cut = daemon.split(separator: "\n").filter { $0.contains("drain_timeout ran out") }
        #expect(cut.count == 2, "\(daemon)")
        #expect(cut.contains { $0.contains("answered 503") && $0.contains("request_id=cut-1") && $0.contains("method=GET") && $0.contains("path=/posts/1") })
        #expect(cut.contains { $0.contains("no answer") && $0.contains("request_id=cut-2") && $0.contains("method=DELETE") && $0.contains("path=/posts/2") })
        #expect(!daemon.contains("page=2"), "never the query")
        let logged = try String(contentsOfFile: directory + "/access.log", encoding: .utf8)
        #expect(logged.split(separator: "\n").contains {
            $0.contains(#""request_id":"cut-1""#) && $0.contains(#""http.response.status_code":503"#) && $0.contains(#""url.path":"/posts/1""#)
        }, "\(logged)")
    }
}

final class LoadCounters: Sendable {
    private let state = Mutex((stopped: false, ok: 0, failed: 0))
    var stopped: Bool { state.withLock { $0.stopped } }
    var totals: (Int, Int) { state.withLock { ($0.ok, $0.failed) } }
    func stop() { state.withLock { $0.stopped = true } }
    func record(ok: Bool) { state.withLock { ok ? ($0.ok += 1) : ($0.failed += 1) } }
}
