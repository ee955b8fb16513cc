import Foundation
import Testing
import VeneerTestSupport

/// Bodies of any size through the real binary: they stream from the upstream to the client
/// with bounded memory, byte for byte, as they come, and a client that leaves mid-body leaves
/// nothing behind in the upstream pool.
@Suite("Streamed bodies as a real process", .serialized)
struct StreamingProcessTests {
    /// Runs `body` with a streaming upstream and a process serving `chain` in front of it (its
    /// YAML lines; nil: a latency_log to the test's folder) with `limits` (YAML flow mapping),
    /// all stopped afterwards.
    func withStreamingProcess(chain: ((_ directory: String) -> String)? = nil, limits: String = "{}",
                              _ body: (_ upstream: StreamingUpstream, _ process: VeneerProcess, _ port: Int, _ directory: String) async throws -> Void) async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let upstream = try await StreamingUpstream.start()
        defer { Task { await upstream.stop() } }
        try """
        environments:
          development:
            origin: { upstream: { url: "\(upstream.url)" } }
            limits: \(limits)
            chain:
        \(chain?(directory) ?? "      - latency_log: { file: \(directory)/latency.log }")
        """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
        defer { process.terminate() }
        try await body(upstream, process, try await process.waitUntilReady(), directory)
    }

    /// Resident memory once it stops moving: three samples in a row within `tolerance`.
    static func settledResident(of pid: Int32, tolerance: Int = 2 << 20) async throws -> Int {
        var samples: [Int] = []
        _ = try await eventually("resident memory settled (\(samples.suffix(3)))") {
            samples.append(try ProcessProbe.residentBytes(of: pid))
            return samples.count >= 3 && samples.suffix(3).max()! - samples.suffix(3).min()! < tolerance
        }
        return samples.last ?? 0
    }

    @Test("100 clients that do not read a 15 MB answer: Veneer stays under 100 MiB resident; then some read it byte for byte, the others leave")
    func slowClients() async throws {
        try await withStreamingProcess { upstream, process, port, directory in
            let pid = process.process.pid
            let size = 15 << 20
            var readers: [StreamingReader] = []
            for _ in 0..<100 { readers.append(try await StreamingReader.get(port: port, "/posts/1?bytes=\(size)")) }
            guard try await eventually("every request reached the upstream (\(upstream.connections))", { upstream.connections >= 100 }) else { return }
            // The buffers fill and stay full: resident memory stops growing.
            _ = try await Self.settledResident(of: pid)
            let stalled = try ProcessProbe.peakResidentBytes(of: pid)
            #expect(stalled < 100 << 20, "peak resident \(stalled >> 20) MiB with 100 clients not reading")
            // Five read on to the end (1.5 GB for all of them would only make the test slow); the
            // others leave, and their upstream connections close.
            let (reading, leaving) = (readers.prefix(5), readers.dropFirst(5))
            for reader in leaving { reader.close() }
            for reader in reading { reader.startReading() }
            // Each reader's count: one stalled reader (a lost wake-up) reads apart from five slow ones (a loaded run).
            // 75 MB through the debug build: the whole test took up to 119 s in whole-suite runs at
            // load 13-15, against the 120 s this wait alone had.
            _ = try await eventually("the readers read the whole answer (bytes each: \(reading.map(\.progress.bodyBytes)))",
                                     timeout: .seconds(300)) {
                reading.allSatisfy { $0.progress.bodyBytes >= size }
            }
            #expect(reading.allSatisfy { $0.progress.bodyBytes == size && $0.progress.firstMismatch == nil })
            #expect(reading.allSatisfy { $0.progress.head?.contains("Content-Length: \(size)") == true })
            _ = try await eventually("the upstream connections of the clients that left closed (\(upstream.openConnections) open)") {
                upstream.openConnections <= 5
            }
            let peak = try ProcessProbe.peakResidentBytes(of: pid)
            #expect(peak < 100 << 20, "peak resident \(peak >> 20) MiB")
            print("streaming: peak resident \(stalled >> 20) MiB with 100 clients not reading, \(peak >> 20) MiB in all")
            for reader in reading { reader.close() }
        }
    }

    @Test("a 40 MB answer passes byte for byte through cache and latency_log, and the cache does not keep it; a small chunked one it keeps")
    func largeThroughCache() async throws {
        try await withStreamingProcess(chain: { directory in """
                  - latency_log: { file: \(directory)/latency.log }
                  - cache: {}
            """ }) { upstream, process, port, directory in
            let size = 40 << 20
            for round in 1...2 {
                let reader = try await StreamingReader.get(port: port, "/posts/1?bytes=\(size)", reading: true)
                _ = try await eventually("the whole answer (\(reader.progress.bodyBytes) bytes)", timeout: .seconds(120)) { reader.progress.bodyBytes >= size }
                #expect(reader.progress.bodyBytes == size && reader.progress.firstMismatch == nil, "round \(round)")
                let head = reader.progress.head ?? ""
                #expect(head.contains("Content-Length: \(size)"))
                #expect(!head.lowercased().contains("hit"), "round \(round): not a hit: \(head)")
                reader.close()
            }
            #expect(upstream.bodiesCompleted == 2, "the second request went to the upstream: nothing was kept")
            // A chunked answer under max_entry_size is copied as it passes and stored at its end.
            for round in 1...2 {
                let reader = try await StreamingReader.get(port: port, "/posts/2?bytes=\(300 << 10)", reading: true)
                _ = try await eventually("the answer ends (\(reader.progress.bodyBytes) bytes)") {
                    round == 1 ? reader.progress.endsChunked : reader.progress.bodyBytes >= 300 << 10
                }
                let head = reader.progress.head ?? ""
                if round == 2 { #expect(head.contains("hit"), "stored while it passed: \(head)") }
                reader.close()
            }
            #expect(upstream.bodiesCompleted == 3, "the chunked answer was fetched once")
            // latency_log's file is written by a thread of its own, in batches.
            let logged = { ((try? String(contentsOfFile: directory + "/latency.log", encoding: .utf8)) ?? "").split(separator: "\n") }
            try await eventually("four lines are written (\(logged().count) so far)") { logged().count >= 4 }
            #expect(logged().count == 4, "latency_log saw every request")
        }
    }

    @Test("the first event of an upstream's server-sent events reaches the client while the upstream is still sending")
    func serverSentEvents() async throws {
        try await withStreamingProcess { upstream, process, port, directory in
            let reader = try await StreamingReader.get(port: port, "/posts/3", reading: true)
            defer { reader.close() }
            _ = try await eventually("the first event arrived (\(reader.progress.text))") { reader.progress.text.contains("data: first") }
            #expect(!upstream.eventsReleased, "the upstream has not finished")
            #expect(reader.progress.head?.contains("text/event-stream") == true)
            upstream.releaseEvents()
            _ = try await eventually("the second event and the end arrived (\(reader.progress.text))") {
                reader.progress.text.contains("data: second") && reader.progress.text.hasSuffix("0\r\n\r\n")
            }
        }
    }

    @Test("a client that leaves mid-body: its upstream connection is closed, not left in the pool; the next request gets a new one")
    func clientLeaves() async throws {
        try await withStreamingProcess { upstream, process, port, directory in
            // 1 GB (made as it is sent): a client reading at loopback speed had read all of 15 MB
            // once before the poll below saw its first bytes.
            let leaving = try await StreamingReader.get(port: port, "/posts/1?bytes=\(1 << 30)", reading: true)
            _ = try await eventually("part of the body arrived") { leaving.progress.bodyBytes > 0 }
            leaving.close()
            _ = try await eventually("the upstream connection was closed (\(upstream.openConnections) open)") { upstream.openConnections == 0 }
            #expect(upstream.bodiesCompleted == 0)
            let next = try await StreamingReader.get(port: port, "/posts/1?bytes=\(1 << 20)", reading: true)
            defer { next.close() }
            _ = try await eventually("the next answer arrived whole") { next.progress.bodyBytes >= 1 << 20 }
            #expect(next.progress.firstMismatch == nil)
            #expect(upstream.connections == 2, "on a new connection")
        }
    }

    @Test("memory freed after a burst goes back to the system: within twice the idle figure ten seconds after 100 slow clients of a 15 MB answer leave")
    func memoryReturns() async throws {
        try await withStreamingProcess { upstream, process, port, directory in
            let pid = process.process.pid
            // The idle figure: after one answer (what the first request allocates for good is no burst).
            let first = try await StreamingReader.get(port: port, "/posts/1?bytes=\(1 << 20)", reading: true)
            _ = try await eventually("the first answer arrived") { first.progress.bodyBytes >= 1 << 20 }
            first.close()
            let idle = try await Self.settledResident(of: pid, tolerance: 1 << 20)
            var readers: [StreamingReader] = []
            for _ in 0..<100 { readers.append(try await StreamingReader.get(port: port, "/posts/1?bytes=\(15 << 20)")) }
            guard try await eventually("every request reached the upstream (\(upstream.connections))", { upstream.connections >= 100 }) else { return }
            let burst = try await Self.settledResident(of: pid)
            for reader in readers { reader.close() }
            _ = try await eventually("the upstream connections closed (\(upstream.openConnections) open)") { upstream.openConnections == 0 }
            // Twice the idle figure is the issue's bound; streaming keeps the burst itself near it
            // (about 80 MiB against 42 idle in the debug build), so the test asks too that three
            // quarters of what the burst took went back (without malloc_trim: 80 MiB stay).
            var after = 0
            let returned = try await eventually("resident memory back within twice the idle \(idle >> 20) MiB, most of the burst's \(burst >> 20) MiB returned (\(after >> 20) MiB)",
                                                timeout: .seconds(10)) {
                after = try ProcessProbe.residentBytes(of: pid)
                return after <= 2 * idle && after <= idle + (burst - idle) / 4
            }
            print("memory return: idle \(idle >> 20) MiB, burst \(burst >> 20) MiB, after \(after >> 20) MiB (returned: \(returned))")
        }
    }

    @Test("memory freed after a burst of bodies read whole goes back to the system: 60 uploads of 900 KB held at once, then answered, and resident memory is within twice the idle figure ten seconds later")
    func bufferedMemoryReturns() async throws {
        try await withStreamingProcess { _, process, port, _ in
            let pid = process.process.pid
            let size = 900_000
            // The idle figure, after one such body (what a first request allocates for good is no burst).
            let first = try await RawConnection.connect(port: port)
            try await first.send("PUT /posts/1 HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nContent-Type: application/json\r\nContent-Length: \(size)\r\n\r\n" + String(repeating: "x", count: size))
            #expect(try await first.responses(1).first?.status == 400, "posts bodies are validated: read whole")
            first.close()
            let idle = try await Self.settledResident(of: pid, tolerance: 1 << 20)
            // Sixty bodies, each but its last byte sent: Veneer holds them all at once.
            var uploads: [RawConnection] = []
            for _ in 0..<60 {
                let connection = try await RawConnection.connect(port: port)
                try await connection.send("PUT /posts/1 HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nContent-Type: application/json\r\nContent-Length: \(size)\r\n\r\n" + String(repeating: "x", count: size - 1))
                uploads.append(connection)
            }
            var held = 0
            _ = try await eventually("the sixty bodies are held (\(held >> 20) MiB)") {
                held = try ProcessProbe.residentBytes(of: pid)
                return held >= idle + 40 << 20
            }
            let burst = try await Self.settledResident(of: pid)
            for connection in uploads { try await connection.send("x") }
            for connection in uploads {
                #expect(try await connection.responses(1).first?.status == 400)
                connection.close()
            }
            // Twice the idle figure, and three quarters of what the burst took given back
            // (without MemoryTrimService's malloc_trim, glibc keeps the freed heap).
            var after = 0
            let returned = try await eventually("resident memory back within twice the idle \(idle >> 20) MiB, most of the burst's \(burst >> 20) MiB returned (\(after >> 20) MiB)",
                                                timeout: .seconds(10)) {
                after = try ProcessProbe.residentBytes(of: pid)
                return after <= 2 * idle && after <= idle + (burst - idle) / 4
            }
            print("memory return (bodies read whole): idle \(idle >> 20) MiB, burst \(burst >> 20) MiB, after \(after >> 20) MiB (returned: \(returned))")
        }
    }

    /// A figure of `/-/metrics`.
    static func metric(_ name: String, port: Int) async throws -> Int? {
        let text = try await RawHTTP.request(port: port, "GET", "/-/metrics").text
        let line = text.split(separator: "\n").first { $0.hasPrefix(name + " ") }
        return line.flatMap { Double($0.split(separator: " ").last ?? "") }.map { Int($0) }
    }

    @Test("a mix of traffic against a 4 MB limits.buffered: whole ~200 KB answers, streamed answers a cache copies, uploads; what is buffered never goes over it, uploads beyond it get 503 overloaded, then it recovers")
    func mixedTraffic() async throws {
        try await withStreamingProcess(chain: { _ in "      - cache: {}" }, limits: "{ buffered: 4MB, buffered_wait: 50ms }") { _, _, port, _ in
            let limit = 4 << 20
            let upload = 600 << 10
            // Alone first: a whole answer takes its length while it is held; a streamed one the
            // cache copies takes what its copy holds (300 KB); both give it back.
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1?bytes=200000").body.count == 200_000)
            let whole = try #require(try await Self.metric("veneer_buffered_peak_bytes", port: port))
            #expect(whole >= 200_000 && whole < 300_000, "a whole answer reserved its length: peak \(whole)")
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/2?bytes=300000").body.count == 300_000)
            _ = try await eventually("the cache's copy took its share (peak \(whole))") {
                try await Self.metric("veneer_buffered_peak_bytes", port: port) ?? 0 >= 300_000
            }
            _ = try await eventually("and gave it back") { try await Self.metric("veneer_buffered_bytes", port: port) == 0 }
            // Uploads whose bodies are slow to come: each holds its 600 KB from its head on.
            var slow: [RawConnection] = []
            for _ in 0..<5 {
                let connection = try await RawConnection.connect(port: port)
                try await connection.send("PUT /posts/1 HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nContent-Type: application/json\r\nContent-Length: \(upload)\r\n\r\n{")
                slow.append(connection)
            }
            _ = try await eventually("the slow uploads hold their share") { try await Self.metric("veneer_buffered_bytes", port: port) == 5 * upload }
            let body = String(repeating: "x", count: upload)
            let (statuses, wholeOK, streamedOK) = try await withThrowingTaskGroup(of: (Int?, Bool?, Bool?).self) { group in
                for index in 0..<16 {
                    group.addTask {
                        let size = 200_000 + index
                        let answer = try await RawHTTP.request(port: port, "GET", "/posts/1?bytes=\(size)")
                        return (nil, answer.status == 200 && answer.body.count == size, nil)
                    }
                }
                for index in 0..<8 {
                    group.addTask {
                        let size = 300_000 + index
                        let answer = try await RawHTTP.request(port: port, "GET", "/posts/2?bytes=\(size)")
                        return (nil, nil, answer.status == 200 && answer.body.count == size)
                    }
                }
                for _ in 0..<8 {
                    group.addTask {
                        let answer = try await RawHTTP.request(port: port, "PUT", "/posts/1", headers: [("Content-Type", "application/json")], body: body)
                        if answer.status == 503 {
                            #expect(answer.errorCode == "overloaded" && answer.header("Retry-After") == "1")
                        }
                        return (answer.status, nil, nil)
                    }
                }
                var statuses: [Int] = [], whole: [Bool] = [], streamed: [Bool] = []
                for try await (status, isWhole, isStreamed) in group {
                    if let status { statuses.append(status) }
                    if let isWhole { whole.append(isWhole) }
                    if let isStreamed { streamed.append(isStreamed) }
                }
                return (statuses, whole, streamed)
            }
            #expect(wholeOK.allSatisfy { $0 } && wholeOK.count == 16, "every whole answer passed whole: with no room one streams instead")
            #expect(streamedOK.allSatisfy { $0 } && streamedOK.count == 8, "every streamed answer passed whole, its cache copy kept or dropped")
            #expect(statuses.contains(503), "uploads beyond the budget are refused: \(statuses)")
            let peak = try #require(try await Self.metric("veneer_buffered_peak_bytes", port: port))
            #expect(peak <= limit && peak >= 5 * upload, "the most ever buffered at once: \(peak) bytes")
            for connection in slow { connection.close() }
            _ = try await eventually("nothing buffered once the clients are gone") { try await Self.metric("veneer_buffered_bytes", port: port) == 0 }
            let after = try await RawHTTP.request(port: port, "PUT", "/posts/1", headers: [("Content-Type", "application/json")], body: body)
            #expect(after.status != 503, "room again: \(after.status)")
            #expect(try await Self.metric("veneer_buffered_peak_bytes", port: port) ?? .max <= limit)
        }
    }
}

@Suite("limits.buffered as a real process")
struct BufferBudgetProcessTests {
    /// The port of a process serving the mock with `limits` (the YAML mapping's contents), stopped after `body`.
    func withMockProcess(limits: String, _ body: (_ port: Int) async throws -> Void) async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try """
        environments:
          development:
            origin: { mock: { sample: true } }
            limits: { \(limits) }
        """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
        defer { process.terminate() }
        try await body(try await process.waitUntilReady())
    }

    @Test("a request body that would take what is buffered over limits.buffered gets 503 overloaded; once the first is gone, it fits")
    func overloaded() async throws {
        try await withMockProcess(limits: "buffered: 1MB") { port in
            let size = 600 << 10
            // A client whose body is slow to come: its 600 KB are reserved from the start.
            let slow = try await RawConnection.connect(port: port)
            try await slow.send("PUT /posts/1 HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nContent-Type: application/json\r\nContent-Length: \(size)\r\n\r\n{\"title\":\"")
            let padding = String(repeating: "x", count: size - 23)
            let body = #"{"title":""# + padding + #"","body":"b"}"#
            var refused: RawResponse?
            _ = try await eventually("a second 600 KB body is refused while the first is held (\(refused?.status ?? 0))") {
                refused = try? await RawHTTP.request(port: port, "PUT", "/posts/1", headers: [("Content-Type", "application/json")], body: body)
                return refused?.status == 503
            }
            #expect(refused?.errorCode == "overloaded" && refused?.header("Retry-After") == "1")
            slow.close()
            var after: RawResponse?
            _ = try await eventually("room again once the first client left (\(after?.status ?? 0))") {
                after = try? await RawHTTP.request(port: port, "PUT", "/posts/1", headers: [("Content-Type", "application/json")], body: body)
                return after.map { $0.status != 503 } ?? false
            }
        }
    }

    @Test("a chunked body read whole takes its share of limits.buffered as it arrives: over it, 503 overloaded and the connection closes")
    func chunkedOverloaded() async throws {
        try await withMockProcess(limits: "buffered: 1MB, request_body: 4MB") { port in
            let uploader = try await Uploader.send(port: port, "POST", "/posts", size: 2 << 20, chunked: true, headers: ["Content-Type: application/json"])
            defer { uploader.leave() }
            _ = try await eventually("refused, and the connection closed (\(uploader.progress.answer.prefix(200)))") { uploader.progress.closed }
            #expect(uploader.progress.status == 503)
            #expect(uploader.progress.answer.contains("overloaded") && uploader.progress.answer.contains("Retry-After: 1"))
        }
    }
}
