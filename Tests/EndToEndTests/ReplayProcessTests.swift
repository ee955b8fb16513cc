import Foundation
import Synchronization
import Testing
import VeneerTestSupport

@Suite("replay as a real process")
struct ReplayProcessTests {
    static func config(_ directory: String, upstream: String) -> String {
        """
        environments:
          development:
            origin: { mock: { seed: \(directory)/seed.json } }
          staging:
            origin: { upstream: { url: "\(upstream)" } }
            chain:
              - record: { file: \(directory)/staging.har }
          offline:
            origin: { replay: { file: \(directory)/staging.har } }
          hybrid:
            origin: { replay: { file: \(directory)/staging.har, on_miss: upstream, upstream: { url: "\(upstream)" } } }
        """
    }

    @Test("round trip: record staging through Veneer, stop the origin, replay the same answers offline; misses are 404 or go upstream; the mock's seed still works")
    func roundTrip() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try #"[{"id": 7, "title": "seeded", "body": "from the seed"}]"#.write(toFile: directory + "/seed.json", atomically: true, encoding: .utf8)
        let version = Counter()
        let upstream = try await TestUpstream.start { request in
            switch (request.method, request.target) {
            case ("GET", "/posts/1"): return .json(#"{"id":1,"title":"version \#(version.next())","body":"b"}"#, headers: [("ETag", "\"v\"")])
            case ("GET", let target) where target.hasPrefix("/posts?"): return .json(#"[{"id":1,"title":"t","body":"b"}]"#)
            case ("POST", "/posts"): return .json(#"{"id":101,"title":"new","body":"b"}"#, status: 201, headers: [("Location", "/posts/101")])
            default: return .json(#"{"error":"not_found"}"#, status: 404)
            }
        }
        try Self.config(directory, upstream: upstream.url).write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        let record = try VeneerProcess(["run", "--config", "veneer.yaml", "-e", "staging", "--listen", "127.0.0.1:0"], directory: directory)
        var port = try await record.waitUntilReady()
        #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").text.contains("version 1"))
        #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").text.contains("version 2"))
        #expect(try await RawHTTP.request(port: port, "GET", "/posts?userId=1&_limit=5").status == 200)
        #expect(try await RawHTTP.request(port: port, "POST", "/posts", headers: [("Content-Type", "application/json")],
                                          body: #"{"title":"new","body":"b"}"#).status == 201)
        record.signal(SIGTERM)
        #expect(await record.wait() == 0)
        #expect(try await VeneerProcess.run(["check", "--all", "--config", "veneer.yaml"], directory: directory).status == 0)
        await upstream.stop()

        let offline = try VeneerProcess(["run", "--config", "veneer.yaml", "-e", "offline", "--listen", "127.0.0.1:0"], directory: directory)
        port = try await offline.waitUntilReady()
        let latest = try await RawHTTP.request(port: port, "GET", "/posts/1")
        #expect(latest.status == 200 && latest.text.contains("version 2") && latest.header("etag") == "\"v\"", "the latest entry wins")
        #expect(try await RawHTTP.request(port: port, "GET", "/posts?_limit=5&userId=1").text.contains(#""id":1"#))
        let created = try await RawHTTP.request(port: port, "POST", "/posts", headers: [("Content-Type", "application/json")], body: #"{"title":"x","body":"y"}"#)
        #expect(created.status == 201 && created.header("location") == "/posts/101")
        let miss = try await RawHTTP.request(port: port, "GET", "/posts/2")
        #expect(miss.status == 404 && miss.errorCode == "not_found")
        // A HEAD says how long the GET's body is (RFC 9110 §9.3.2), and sends none: read raw.
        let raw = try await RawHTTP.exchange(port: port, Array("HEAD /posts/1 HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n".utf8))
        let head = String(decoding: raw, as: UTF8.self)
        #expect(head.hasPrefix("HTTP/1.1 200") && head.contains("\r\nContent-Length: \(latest.body.count)\r\n") && head.hasSuffix("\r\n\r\n"), "\(head)")
        offline.signal(SIGTERM)
        #expect(await offline.wait() == 0)

        // The mock environment of the same file still starts from its seed.
        let mock = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
        defer { mock.terminate() }
        port = try await mock.waitUntilReady()
        #expect(try await RawHTTP.request(port: port, "GET", "/posts/7").text.contains("seeded"))
    }

    @Test("on_miss: upstream forwards what was not recorded and answers the rest from the file")
    func missGoesUpstream() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try #"[]"#.write(toFile: directory + "/seed.json", atomically: true, encoding: .utf8)
        try #"{"log":{"version":"1.2","creator":{"name":"t","version":"1"},"entries":[{"startedDateTime":"2026-11-23T10:00:00.000Z","request":{"method":"GET","url":"http://s/posts/1"},"response":{"status":200,"headers":[{"name":"Content-Type","value":"application/json"}],"content":{"text":"{\"id\":1,\"title\":\"recorded\",\"body\":\"b\"}"}}}]}}"#
            .write(toFile: directory + "/staging.har", atomically: true, encoding: .utf8)
        try await withTestUpstream({ _ in .json(#"{"id":2,"title":"live","body":"b"}"#) }) { (upstream: TestUpstream) async throws in
            try Self.config(directory, upstream: upstream.url).write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
            let process = try VeneerProcess(["run", "--config", "veneer.yaml", "-e", "hybrid", "--listen", "127.0.0.1:0"], directory: directory)
            defer { process.terminate() }
            let port = try await process.waitUntilReady()
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/1").text.contains("recorded"))
            #expect(try await RawHTTP.request(port: port, "GET", "/posts/2").text.contains("live"))
            #expect(upstream.requests.map(\.target) == ["/posts/2"])
        }
    }
}

/// A counter for upstream answers that change between requests.
final class Counter: Sendable {
    private let value = Mutex(0)
    func next() -> Int { value.withLock { $0 += 1; return $0 } }
}
