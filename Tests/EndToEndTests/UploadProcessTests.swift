import Foundation
import Testing
import VeneerTestSupport

/// Request bodies that stream (a resource declared `{ name: uploads, body: stream }`) through
/// the real binary: byte for byte to the upstream whatever their size, with backpressure (a
/// slow upstream stops Veneer reading its clients: bounded memory), and the closing rules of
/// a client that leaves, an upstream that answers early and a client that pauses.
@Suite("Streamed uploads as a real process", .serialized)
struct UploadProcessTests {
    /// Runs `body` with an upload-taking upstream, a token endpoint, and a process whose chain
    /// is latency_log, cache and auth_refresh before the upstream; `limits` are the YAML
    /// mapping's contents. The limits let a body be read whole up to 64 MB (as a configuration
    /// would to accept such uploads at all before bodies streamed). The upstream's `timeout`
    /// (the wait for an answer's head once the body has been sent) is `timeout`.
    func withUploadProcess(limits: String = "request_body: 64MB, buffered: 4GB", timeout: String = "300s",
                           _ body: (_ upstream: UploadUpstream, _ process: VeneerProcess, _ port: Int, _ directory: String) async throws -> Void) async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let upstream = try await UploadUpstream.start()
        defer { Task { await upstream.stop() } }
        let tokens = try await TestTokenServer.start()
        defer { Task { await tokens.stop() } }
        try """
        state_dir: \(directory)/state
        environments:
          development:
            origin: { upstream: { url: "\(upstream.url)", timeout: \(timeout) } }
            resources: [posts, { name: uploads, id: string, body: stream }]
            limits: { \(limits) }
            access_log: \(directory)/access.log
            chain:
              - latency_log: { file: \(directory)/latency.log }
              - cache: {}
              - auth_refresh: { token_url: "\(tokens.url)", client_id: veneer, client_secret: s3cret, refresh_token: rt-0 }
        """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
        defer { process.terminate() }
        try await body(upstream, process, try await process.waitUntilReady(), directory)
    }

    @Test("a 40 MB upload passes byte for byte (SHA-256 at the upstream) through latency_log, cache and auth_refresh, reaching the upstream as it comes")
    func largeUpload() async throws {
        try await withUploadProcess { upstream, process, port, directory in
            let size = 40 << 20
            // Half of it, then a pause: what came is at the upstream already (nothing waits for the whole).
            let uploader = try await Uploader.send(port: port, "PUT", "/uploads/1", size: size, stopAfter: size / 2)
            defer { uploader.leave() }
            _ = try await eventually("the first half reached the upstream while the client paused (\(upstream.bytesRead >> 20) MiB)") {
                upstream.bytesRead >= size / 2
            }
            #expect(upstream.received.isEmpty)
            uploader.resume()
            _ = try await eventually("the answer came (\(uploader.progress.answer.prefix(200)))", timeout: .seconds(120)) {
                uploader.progress.answer.contains("sha256")
            }
            let expected = UploadUpstream.patternSHA256(size)
            #expect(uploader.progress.status == 200)
            #expect(upstream.received.map(\.sha256) == [expected])
            #expect(upstream.received.first?.bytes == size && upstream.received.first?.chunked == false)
            #expect(uploader.progress.answer.contains(expected))
            // latency_log's file is written by a thread of its own, in batches.
            let latencyLines = { ((try? String(contentsOfFile: directory + "/latency.log", encoding: .utf8)) ?? "").split(separator: "\n") }
            try await eventually("the upload's line is written") { latencyLines().count >= 1 }
            #expect(latencyLines().count == 1, "latency_log saw the upload")
            // The access log counts the body that streamed through.
            let logged = try String(contentsOfFile: directory + "/access.log", encoding: .utf8)
            let requestSize = logged.split(separator: "\"http.request.size\":").dropFirst().first?.prefix { $0.isNumber }
            #expect(requestSize.flatMap { Int($0) }.map { $0 > size } == true, "bytes in: \(requestSize ?? "none")")
        }
    }

    @Test("a chunked upload goes to the upstream chunked, byte for byte")
    func chunkedUpload() async throws {
        try await withUploadProcess { upstream, process, port, directory in
            let size = 5 << 20
            let uploader = try await Uploader.send(port: port, "POST", "/uploads", size: size, chunked: true)
            defer { uploader.leave() }
            _ = try await eventually("the answer came (\(uploader.progress.answer.prefix(200)))", timeout: .seconds(60)) {
                uploader.progress.answer.contains("sha256")
            }
            #expect(uploader.progress.status == 200)
            #expect(upstream.received.first?.chunked == true, "streamed to the upstream with Transfer-Encoding: chunked")
            #expect(upstream.received.map(\.sha256) == [UploadUpstream.patternSHA256(size)])
        }
    }

    @Test("20 concurrent 40 MB uploads to an upstream that does not read: Veneer stays under 100 MiB resident; released, all arrive whole")
    func slowUpstream() async throws {
        try await withUploadProcess { upstream, process, port, directory in
            let pid = process.process.pid
            let size = 40 << 20
            var uploaders: [Uploader] = []
            for index in 0..<20 { uploaders.append(try await Uploader.send(port: port, "PUT", "/uploads/stall\(index)", size: size)) }
            defer { for uploader in uploaders { uploader.leave() } }
            guard try await eventually("every upload reached the upstream (\(upstream.heads))", { upstream.heads >= 20 }) else { return }
            // The socket buffers fill and stay full: what the clients could send stops growing.
            var sent: [Int] = []
            _ = try await eventually("the clients stopped sending (\(sent.suffix(3)))") {
                sent.append(uploaders.reduce(0) { $0 + $1.progress.sent })
                return sent.count >= 3 && sent.suffix(3).max()! - sent.suffix(3).min()! < 1 << 20
            }
            _ = try await StreamingProcessTests.settledResident(of: pid)
            let stalled = try ProcessProbe.peakResidentBytes(of: pid)
            #expect(stalled < 100 << 20, "peak resident \(stalled >> 20) MiB with 20 uploads held up by the upstream")
            // What they sent sits in the kernel's socket buffers (a few MB per connection), not in Veneer.
            #expect(sent.last! < 20 * size / 2, "the clients were held back (\(sent.last! >> 20) MiB sent of \(20 * size >> 20))")
            upstream.release()
            _ = try await eventually("every upload arrived (\(upstream.received.count))", timeout: .seconds(300)) { upstream.received.count == 20 }
            let expected = UploadUpstream.patternSHA256(size)
            #expect(upstream.received.allSatisfy { $0.sha256 == expected && $0.bytes == size })
            _ = try await eventually("every client had its answer") { uploaders.allSatisfy { $0.progress.status == 200 } }
            let peak = try ProcessProbe.peakResidentBytes(of: pid)
            #expect(peak < 100 << 20, "peak resident \(peak >> 20) MiB")
            print("uploads: peak resident \(stalled >> 20) MiB with 20 uploads of 40 MB held up, \(peak >> 20) MiB in all")
        }
    }

    @Test("a client that leaves mid-upload: its upstream connection is closed, not pooled; the next upload gets a new one")
    func clientLeaves() async throws {
        try await withUploadProcess { upstream, process, port, directory in
            // It sends 8 MB of 40, then leaves: Veneer, waiting for the next part, sees it go.
            let leaving = try await Uploader.send(port: port, "PUT", "/uploads/4", size: 40 << 20, stopAfter: 8 << 20)
            _ = try await eventually("the upload is under way (\(upstream.bytesRead) bytes at the upstream)") { upstream.bytesRead >= 8 << 20 }
            leaving.leave()
            _ = try await eventually("the upstream connection was closed (\(upstream.openConnections) open)") { upstream.openConnections == 0 }
            #expect(upstream.received.isEmpty)
            let next = try await Uploader.send(port: port, "PUT", "/uploads/2", size: 1 << 20)
            defer { next.leave() }
            _ = try await eventually("the next upload was answered (\(next.progress.answer.prefix(100)))") { next.progress.status == 200 }
            #expect(upstream.received.map(\.sha256) == [UploadUpstream.patternSHA256(1 << 20)])
            #expect(upstream.connections == 2, "on a new connection")
        }
    }

    @Test("an upstream that answers before the body's end: its answer reaches the client, whose connection is then closed, the rest unread")
    func earlyAnswer() async throws {
        try await withUploadProcess { upstream, process, port, directory in
            let size = 40 << 20
            let uploader = try await Uploader.send(port: port, "PUT", "/uploads/early", size: size)
            defer { uploader.leave() }
            _ = try await eventually("the answer came and the connection closed (\(uploader.progress.answer.prefix(200)))") {
                uploader.progress.closed
            }
            #expect(uploader.progress.status == 413)
            #expect(uploader.progress.answer.contains("too_big"), "the upstream's own answer")
            #expect(uploader.progress.answer.lowercased().contains("connection: close"))
            // Veneer reads and drops what the client still sends for a moment (its lingering
            // close, so that the client sees the answer): none of it goes to the upstream.
            #expect(upstream.bytesRead < size / 2, "the rest was not sent on (\(upstream.bytesRead >> 20) MiB at the upstream)")
            _ = try await eventually("that upstream connection was closed too (\(upstream.openConnections) open)") { upstream.openConnections == 0 }
        }
    }

    @Test("an early 401 to an upload: auth_refresh cannot send the body again and passes it on; the client connection then closes")
    func earlyUnauthorized() async throws {
        try await withUploadProcess { upstream, process, port, directory in
            let uploader = try await Uploader.send(port: port, "PUT", "/uploads/deny", size: 40 << 20)
            defer { uploader.leave() }
            _ = try await eventually("the answer came and the connection closed (\(uploader.progress.answer.prefix(200)))") { uploader.progress.closed }
            #expect(uploader.progress.status == 401)
            #expect(upstream.heads == 1, "not retried")
            _ = try await eventually("that upstream connection was closed (\(upstream.openConnections) open)") { upstream.openConnections == 0 }
        }
    }

    @Test("an upload that pauses longer than body_timeout: 408, and its upstream connection is closed")
    func pause() async throws {
        // body_timeout leaves a loaded run time to open the upload's upstream connection and
        // stream to it before the pause ends (at 1 s the upstream had once seen nothing).
        try await withUploadProcess(limits: "body_timeout: 3s") { upstream, process, port, directory in
            let pausing = try await Uploader.send(port: port, "PUT", "/uploads/3", size: 4 << 20, stopAfter: 1 << 20)
            defer { pausing.leave() }
            _ = try await eventually("the upload began at the upstream (\(upstream.bytesRead) bytes)") { upstream.heads == 1 && upstream.bytesRead > 0 }
            _ = try await eventually("the answer came (\(pausing.progress.answer.prefix(200)))", timeout: .seconds(20)) {
                pausing.progress.status != nil
            }
            #expect(pausing.progress.status == 408)
            #expect(upstream.heads == 1 && upstream.bytesRead > 0, "the upload had begun at the upstream (\(upstream.bytesRead) bytes)")
            #expect(pausing.progress.answer.contains("request_timeout"))
            _ = try await eventually("the upstream connection was closed (\(upstream.openConnections) open)") { upstream.openConnections == 0 }
            #expect(upstream.received.isEmpty)
        }
    }

    @Test("an upload that takes longer than the upstream's timeout in all passes: timeout waits for the answer's head once the body has been sent")
    func longerThanTimeout() async throws {
        try await withUploadProcess(timeout: "1s") { upstream, process, port, directory in
            // Too large to sit whole in the sockets' buffers: the body is still being sent while held up.
            let size = 40 << 20
            let uploader = try await Uploader.send(port: port, "PUT", "/uploads/stall-long", size: size)
            defer { uploader.leave() }
            _ = try await eventually("the upload reached the upstream (\(upstream.heads))") { upstream.heads == 1 }
            // The upload is held up by its upstream for twice the timeout (the time passing is the point).
            try await Task.sleep(for: .seconds(2))
            #expect(uploader.progress.status == nil, "not cut: \(uploader.progress.answer.prefix(200))")
            upstream.release()
            _ = try await eventually("the answer came (\(uploader.progress.answer.prefix(200)))", timeout: .seconds(60)) {
                uploader.progress.status != nil
            }
            #expect(uploader.progress.status == 200)
            #expect(upstream.received.map(\.sha256) == [UploadUpstream.patternSHA256(size)])
        }
    }

    @Test("an upstream that stops reading an upload for longer than body_timeout: 504 upstream_timeout, the client's connection and the upstream's closed")
    func upstreamStopsReading() async throws {
        try await withUploadProcess(limits: "body_timeout: 1s") { upstream, process, port, directory in
            let uploader = try await Uploader.send(port: port, "PUT", "/uploads/stall-cut", size: 40 << 20)
            defer { uploader.leave() }
            _ = try await eventually("the answer came and the connection closed (\(uploader.progress.answer.prefix(200)))", timeout: .seconds(30)) {
                uploader.progress.closed
            }
            // The upstream is the slow one, not the client (whose pauses get 408): a gateway timeout.
            #expect(uploader.progress.status == 504)
            #expect(uploader.progress.answer.contains("upstream_timeout"))
            #expect(uploader.progress.answer.lowercased().contains("connection: close"))
            // A stalled reader notices its connection closing once it reads again.
            upstream.release()
            _ = try await eventually("the upstream connection was closed (\(upstream.openConnections) open)") { upstream.openConnections == 0 }
            #expect(upstream.received.isEmpty)
        }
    }

    @Test("posts still read whole and validate: bad JSON is 400 and never reaches the upstream; a good post passes")
    func postsValidate() async throws {
        try await withUploadProcess { upstream, process, port, directory in
            let bad = try await RawHTTP.request(port: port, "POST", "/posts", headers: [("Content-Type", "application/json")], body: "{not json")
            #expect(bad.status == 400 && bad.errorCode == "bad_request")
            #expect(upstream.heads == 0)
            let good = try await RawHTTP.request(port: port, "POST", "/posts", headers: [("Content-Type", "application/json")],
                                                 body: #"{"title":"t","body":"b"}"#)
            #expect(good.status == 200)
            #expect(upstream.received.first?.bytes == 24 && upstream.received.first?.chunked == false)
        }
    }
}
