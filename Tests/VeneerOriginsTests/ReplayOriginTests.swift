import Foundation
import HTTPTypes
import NIOCore
import Testing
import VeneerConfig
import VeneerCore
import VeneerOrigins
import VeneerTestSupport

@Suite("replay origin")
struct ReplayOriginTests {
    static func entry(_ method: String, _ url: String, status: Int = 200, text: String, started: String,
                      headers: [(String, String)] = [("Content-Type", "application/json")], content extra: String = "") -> String {
        let fields = headers.map { #"{"name":"\#($0.0)","value":"\#($0.1)"}"# }.joined(separator: ",")
        return #"{"startedDateTime":"\#(started)","time":1,"request":{"method":"\#(method)","url":"\#(url)","headers":[]},"response":{"status":\#(status),"statusText":"","headers":[\#(fields)],"content":{"size":0,"mimeType":"application/json","text":"\#(text)"\#(extra)}}}"#
    }

    static func har(_ entries: [String]) -> String {
        #"{"log":{"version":"1.2","creator":{"name":"test","version":"1"},"entries":["# + entries.joined(separator: ",") + "]}}"
    }

    static func decode(_ replay: String, directory: String) throws -> ReplayOriginOptions {
        let registry = Registry(origins: [ReplayOrigin.factory])
        let document = try ConfigDocument(source: ConfigSource(file: "t.yaml", text: "environments: {development: {origin: {replay: \(replay)}}}"))
        let spec = try document.environment("development", registry: registry, variables: [:], workingDirectory: directory)
        return try #require(spec.origin.options as? ReplayOriginOptions)
    }

    static func problems(_ replay: String, directory: String) -> [String] {
        do {
            _ = try decode(replay, directory: directory)
            return []
        } catch let error as ConfigError {
            return error.diagnostics.map(\.description)
        } catch {
            return ["\(error)"]
        }
    }

    func origin(_ entries: [String], in directory: String) throws -> ReplayOrigin {
        try Self.har(entries).write(toFile: directory + "/r.har", atomically: true, encoding: .utf8)
        return ReplayOrigin(book: try Self.decode("{file: r.har}", directory: directory).book)
    }

    func text(_ response: ProxyResponse) -> String { String(buffer: response.body) }

    @Test("answers match method, path and query (in any order); the latest entry wins, by time, then by position")
    func matching() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let replay = try origin([
            Self.entry("GET", "http://staging/posts/1", text: "new", started: "2026-11-23T10:00:02.000Z"),
            Self.entry("GET", "http://staging/posts/1", text: "old", started: "2026-11-23T10:00:01.000Z"),
            Self.entry("GET", "http://staging/posts?userId=1&page=2", text: "page 2", started: "2026-11-23T10:00:00.000Z"),
            Self.entry("POST", "http://staging/posts", status: 201, text: "created", started: "2026-11-23T10:00:00.000Z",
                       headers: [("Location", "/posts/101"), ("Content-Length", "7"), ("Set-Cookie", "<redacted>"), ("Cache-Status", "veneer; hit")]),
            Self.entry("GET", "/posts/2", text: "first", started: ""),
            Self.entry("GET", "/posts/2", text: "second", started: ""),
        ], in: directory)
        #expect(text(try await replay.handle(ProxyRequest(method: .get, route: .item(.posts, "1")))) == "new")
        #expect(text(try await replay.handle(ProxyRequest(method: .get, route: .list(.posts), query: "page=2&userId=1"))) == "page 2")
        #expect(text(try await replay.handle(ProxyRequest(method: .get, route: .item(.posts, "2")))) == "second")
        let created = try await replay.handle(ProxyRequest(method: .post, route: .list(.posts), body: ByteBuffer(string: "{}")))
        #expect(created.status.code == 201 && text(created) == "created" && created.headers[.location] == "/posts/101")
        #expect(created.headers[.contentLength] == nil && created.headers[.setCookie] == nil && created.headers[.cacheStatus] == nil)
        let head = try await replay.handle(ProxyRequest(method: .head, route: .item(.posts, "1")))
        #expect(head.status == .ok && head.body.readableBytes == 0 && head.headers[.contentType] == "application/json")
        for miss in [ProxyRequest(method: .get, route: .item(.posts, "3")), ProxyRequest(method: .get, route: .list(.posts), query: "userId=1"),
                     ProxyRequest(method: .delete, route: .item(.posts, "1"))] {
            await #expect(throws: ProxyError.self) {
                do { _ = try await replay.handle(miss) } catch let error as ProxyError {
                    #expect(error.code == .notFound && error.message.hasPrefix("Nothing was recorded for \(miss.method.rawValue) /posts"))
                    throw error
                }
            }
        }
    }

    @Test("the request's record names the replay and says hit or miss; a miss answered by the fallback comes before the fallback's entry")
    func noted() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let entries = [Self.entry("GET", "http://staging/posts/1", text: "one", started: "2026-11-23T10:00:00.000Z")]
        let replay = try origin(entries, in: directory)
        let hit = ProxyRequest(method: .get, route: .item(.posts, "1"))
        _ = try await replay.handle(hit)
        #expect(hit.record.entries == [.init(name: "replay", detail: "hit")])
        let miss = ProxyRequest(method: .get, route: .item(.posts, "2"))
        _ = try? await replay.handle(miss)
        #expect(miss.record.entries == [.init(name: "replay", detail: "miss")])
        let fallback = RecordingHandler { request in
            request.record.noteOrigin("upstream", time: .milliseconds(2))
            return ProxyResponse(status: .ok)
        }
        let withFallback = ReplayOrigin(book: try Self.decode("{file: r.har}", directory: directory).book, fallback: fallback)
        let passed = ProxyRequest(method: .get, route: .item(.posts, "2"))
        _ = try await withFallback.handle(passed)
        #expect(passed.record.entries == [.init(name: "replay", detail: "miss"), .init(name: "upstream", detail: "", duration: .milliseconds(2))])
    }

    @Test("base64 bodies are decoded and keep their Content-Encoding, text ones lose it; entries whose body was left out are skipped, so an older whole one answers")
    func bodies() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let replay = try origin([
            Self.entry("GET", "/posts/1", text: "whole", started: "2026-11-23T10:00:00.000Z"),
            Self.entry("GET", "/posts/1", text: "", started: "2026-11-23T10:00:05.000Z", content: #","_bodyOmitted":true"#),
            Self.entry("GET", "/posts/2", text: "/9gA", started: "2026-11-23T10:00:00.000Z", headers: [("Content-Encoding", "br")],
                       content: #","encoding":"base64""#),
            Self.entry("GET", "/posts/3", text: "plain", started: "2026-11-23T10:00:00.000Z", headers: [("Content-Encoding", "gzip")]),
        ], in: directory)
        #expect(try await replay.handle(ProxyRequest(method: .get, route: .item(.posts, "2"))).headers[.contentEncoding] == "br")
        let decoded = try await replay.handle(ProxyRequest(method: .get, route: .item(.posts, "3")))
        #expect(text(decoded) == "plain" && decoded.headers[.contentEncoding] == nil, "a body exported decoded is not labelled compressed")
        #expect(text(try await replay.handle(ProxyRequest(method: .get, route: .item(.posts, "1")))) == "whole")
        #expect(Array(try await replay.handle(ProxyRequest(method: .get, route: .item(.posts, "2"))).body.readableBytesView) == [0xFF, 0xD8, 0x00])
        #expect(try Self.decode("{file: r.har}", directory: directory).book.skipped == 1)
    }

    @Test("several files read in order; options are checked: a missing or broken file, on_miss, upstream")
    func options() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try Self.har([Self.entry("GET", "/posts/1", text: "a", started: "2026-11-23T10:00:00.000Z")]).write(toFile: directory + "/a.1.har", atomically: true, encoding: .utf8)
        try Self.har([Self.entry("GET", "/posts/1", text: "b", started: "2026-11-23T10:00:09.000Z")]).write(toFile: directory + "/a.har", atomically: true, encoding: .utf8)
        let both = try Self.decode("{file: [a.1.har, a.har], on_miss: upstream, upstream: {url: 'http://127.0.0.1:1'}}", directory: directory)
        #expect(both.files == [directory + "/a.1.har", directory + "/a.har"] && both.onMiss == .upstream && both.upstream != nil)
        #expect(both.book.answer(method: "GET", path: "/posts/1", query: nil).map { String(buffer: $0.body) } == "b")
        try "{\"log\": {}}".write(toFile: directory + "/empty.har", atomically: true, encoding: .utf8)
        try "{".write(toFile: directory + "/broken.har", atomically: true, encoding: .utf8)
        #expect(Self.problems("{file: nope.har}", directory: directory) == ["t.yaml:1:54: environments.development.origin.replay.file: HAR file \(directory)/nope.har does not exist"])
        #expect(Self.problems("{file: empty.har}", directory: directory).first?.contains("has no log.entries (is it a HAR file?)") == true)
        #expect(Self.problems("{file: broken.har}", directory: directory).first?.contains("is not valid JSON") == true)
        #expect(Self.problems("{}", directory: directory).first?.contains("replay.file: required") == true)
        #expect(Self.problems("{file: a.har, on_miss: upstream}", directory: directory).first?.contains("required with on_miss: upstream") == true)
        #expect(Self.problems("{file: a.har, on_miss: mock}", directory: directory).first?.contains("is not one of not_found, upstream") == true)
        #expect(Self.problems("{file: a.har, upstream: {url: 'http://x'}}", directory: directory).first?.contains("only used with on_miss: upstream") == true)
        #expect(Self.problems("{file: a.har, on_miss: upstream, upstream: {ur: 'http://x'}}", directory: directory).contains { $0.contains("unknown key 'ur'") })
    }

    @Test("an entry with an interim (1xx) status, or one no answer has, is refused at load with its file and index; one that got no answer (status 0) is skipped")
    func interimStatuses() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for (code, kind) in [(101, "interim"), (100, "interim"), (103, "interim"), (600, "not an HTTP status"), (1200, "not an HTTP status")] {
            try Self.har([
                Self.entry("GET", "/posts/1", text: "a", started: "2026-11-23T10:00:00.000Z"),
                Self.entry("GET", "/posts/ws", status: code, text: "", started: "2026-11-23T10:00:01.000Z"),
            ]).write(toFile: directory + "/x.har", atomically: true, encoding: .utf8)
            let problems = Self.problems("{file: x.har}", directory: directory)
            #expect(problems.count == 1 && problems[0].contains("HAR file \(directory)/x.har, entry 1") && problems[0].contains("status \(code)")
                    && problems[0].contains(kind), "\(problems)")
        }
        try Self.har([
            Self.entry("GET", "/posts/1", text: "a", started: "2026-11-23T10:00:00.000Z"),
            Self.entry("GET", "/posts/2", status: 0, text: "", started: "2026-11-23T10:00:01.000Z"),
        ]).write(toFile: directory + "/x.har", atomically: true, encoding: .utf8)
        let book = try Self.decode("{file: x.har}", directory: directory).book
        #expect(book.skipped == 1 && book.answer(method: "GET", path: "/posts/2", query: nil) == nil)
    }

    @Test("hop-by-hop fields and those the recorded Connection names are not replayed; a HEAD gets its GET's Content-Length; the miss message cuts credentials from the query, and a recorded redacted parameter matches any value")
    func recordedFields() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let replay = try origin([
            Self.entry("GET", "/posts/1", text: "ab", started: "2026-11-23T10:00:00.000Z", headers: [
                ("Content-Type", "application/json"), ("Connection", "X-Hop-Secret, close"), ("X-Hop-Secret", "1"), ("Keep-Alive", "timeout=5"),
                ("Upgrade", "h2c"), ("Proxy-Authenticate", "Basic"), ("Content-Length", "2"), ("X-Kept", "yes"), ("X-Echo", "Bearer <redacted>"),
            ]),
            Self.entry("HEAD", "/posts/2", text: "", started: "2026-11-23T10:00:00.000Z", headers: [("Content-Length", "120")]),
            Self.entry("GET", "/posts?access_token=<redacted>&page=2", text: "page 2", started: "2026-11-23T10:00:00.000Z"),
        ], in: directory)
        let answer = try await replay.handle(ProxyRequest(method: .get, route: .item(.posts, "1")))
        #expect(answer.headers[HTTPField.Name("X-Kept")!] == "yes")
        for name in ["X-Hop-Secret", "Connection", "Keep-Alive", "Upgrade", "Proxy-Authenticate", "Content-Length", "X-Echo"] {
            #expect(answer.headers[HTTPField.Name(name)!] == nil, "\(name)")
        }
        let head = try await replay.handle(ProxyRequest(method: .head, route: .item(.posts, "1")))
        #expect(head.headers[.contentLength] == "2" && head.body.readableBytes == 0)
        #expect(try await replay.handle(ProxyRequest(method: .head, route: .item(.posts, "2"))).headers[.contentLength] == "120")
        let redacted = try await replay.handle(ProxyRequest(method: .get, route: .list(.posts), query: "page=2&access_token=anything"))
        #expect(text(redacted) == "page 2")
        let error = await #expect(throws: ProxyError.self) {
            _ = try await replay.handle(ProxyRequest(method: .get, route: .list(.posts), query: "access_token=SECRET-1&client_secret=SECRET-2&page=3"))
        }
        #expect(error?.message == "Nothing was recorded for GET /posts?access_token=<redacted>&client_secret=<redacted>&page=3.")
    }
}
