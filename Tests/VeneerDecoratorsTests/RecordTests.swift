import Foundation
import HTTPTypes
import NIOCore
import Testing
import VeneerConfig
import VeneerCore
@testable import VeneerDecorators
import VeneerTestSupport

/// Decodes record options from YAML through the registry's factory.
func recordOptions(_ yaml: String) throws -> RecordOptions {
    var registry = Registry()
    registry.register(RecordDecorator.factory)
    registry.register(OriginFactory(name: "none", summary: "", options: [], decode: { _ in true }, make: { _, _ in RecordingHandler() }))
    let document = try ConfigDocument(source: ConfigSource(file: "t.yaml", text: "environments: {development: {origin: {none: {}}, chain: [{record: \(yaml)}]}}"))
    let spec = try document.environment("development", registry: registry, variables: [:], workingDirectory: "/tmp")
    return try #require(spec.chain.first?.options as? RecordOptions)
}

@Suite("record")
struct RecordTests {
    let directory: String

    init() throws {
        directory = try temporaryDirectory()
    }

    func recorder(_ inner: any Handler, _ options: RecordOptions) throws -> RecordDecorator {
        let writer = try HARWriter(path: options.file, maxFileSize: options.maxFileSize, keep: options.keep)
        return RecordDecorator(inner: inner, options: options, writer: writer, clock: ManualClock(), logger: quietLogger())
    }

    /// `open()` once the last writer's lock is gone. The lock belongs to the open file, and a
    /// child another test spawns at the moment copies every descriptor until its exec closes
    /// them (close-on-exec): on a loaded machine the first writer's lock outlived its close by
    /// that window, once (CI, 925 tests in parallel). Veneer itself spawns nothing.
    func afterRelease<T>(_ open: () throws -> T) async throws -> T {
        let deadline = ContinuousClock.now + .seconds(10)
        while true {
            do { return try open() } catch let error as HARFileError where error.reason.contains("another writer") && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
        }
    }

    func har(_ path: String) throws -> [String: Any] {
        let data = try #require(FileManager.default.contents(atPath: path))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    func entries(_ path: String) throws -> [[String: Any]] {
        let log = try #require(try har(path)["log"] as? [String: Any])
        #expect(log["version"] as? String == "1.2")
        return try #require(log["entries"] as? [[String: Any]])
    }

    @Test("every exchange becomes a HAR 1.2 entry, and the file is valid HAR after each one")
    func entriesWritten() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/out.har"
        let inner = RecordingHandler { request in
            .json(request.method == .post ? .created : .ok, ByteBuffer(string: #"{"id":1,"title":"t","body":"b"}"#), headers: [.eTag: "\"1-1\""])
        }
        let record = try recorder(inner, RecordOptions(file: file))
        #expect(try entries(file).isEmpty, "valid and empty before the first request")
        _ = try await record.handle(ProxyRequest(method: .get, route: .list(.posts), query: "userId=1&b=2", headers: [HTTPField.Name("Host")!: "api.test:8080"]))
        #expect(try entries(file).count == 1)
        var post = ProxyRequest(method: .post, route: .list(.posts), headers: [.contentType: "application/json"])
        post.body = ByteBuffer(string: #"{"title":"t","body":"b"}"#)
        _ = try await record.handle(post)
        let written = try entries(file)
        #expect(written.count == 2)
        let first = try #require(written.first)
        let request = try #require(first["request"] as? [String: Any])
        #expect(request["method"] as? String == "GET")
        #expect(request["url"] as? String == "http://api.test:8080/posts?userId=1&b=2")
        #expect((request["queryString"] as? [[String: String]])?.first == ["name": "userId", "value": "1"])
        let response = try #require(first["response"] as? [String: Any])
        #expect(response["status"] as? Int == 200)
        #expect((response["headers"] as? [[String: String]])?.contains(["name": "ETag", "value": "\"1-1\""]) == true)
        let content = try #require(response["content"] as? [String: Any])
        #expect(content["text"] as? String == #"{"id":1,"title":"t","body":"b"}"# && content["mimeType"] as? String == "application/json")
        #expect((first["startedDateTime"] as? String)?.hasSuffix("Z") == true && first["time"] != nil && first["timings"] != nil)
        let second = try #require(written.last?["request"] as? [String: Any])
        #expect((second["postData"] as? [String: Any])?["text"] as? String == #"{"title":"t","body":"b"}"#)
        #expect((written.last?["response"] as? [String: Any])?["status"] as? Int == 201)
    }

    @Test("a tracing record says 'recorded' in the recorder's place, before what is inside it; an untraced one gets nothing")
    func noted() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let inner = RecordingHandler { request in
            request.record.append(.init(name: "fault", detail: "delay 1ms"))
            return ProxyResponse(status: .ok)
        }
        let record = try recorder(inner, RecordOptions(file: directory + "/out.har"))
        let traced = ProxyRequest(method: .get, route: .list(.posts), record: RequestRecord(tracing: .serverTiming))
        _ = try await record.handle(traced)
        #expect(traced.record.entries == [.init(name: "record", detail: "recorded"), .init(name: "fault", detail: "delay 1ms")])
        let plain = ProxyRequest(method: .get, route: .list(.posts))
        _ = try await record.handle(plain)
        #expect(plain.record.entries == [.init(name: "fault", detail: "delay 1ms")])
    }

    @Test("Authorization, Cookie, Set-Cookie and token values never reach the file: headers, query, JSON and form bodies")
    func redaction() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/out.har"
        let inner = RecordingHandler { _ in
            .json(.ok, ByteBuffer(string: #"{"access_token":"SECRET-1","nested":{"refresh_token":"SECRET-2"},"list":[{"id_token":"SECRET-3"}],"id":1}"#),
                  headers: [.setCookie: "session=SECRET-4", HTTPField.Name("X-Auth-Token")!: "SECRET-5"])
        }
        let record = try recorder(inner, RecordOptions(file: file, redactHeaders: ["x-account-key"]))
        var request = ProxyRequest(method: .post, route: .list(.posts), query: "access_token=SECRET-6&page=2",
                                   headers: [.authorization: "Bearer SECRET-7", .cookie: "sid=SECRET-8", .contentType: "application/x-www-form-urlencoded",
                                             HTTPField.Name("X-Forwarded-Auth")!: "Basic SECRET-9", HTTPField.Name("X-Account-Key")!: "SECRET-10"])
        request.body = ByteBuffer(string: "title=t&client_secret=SECRET-11&password=SECRET-12")
        _ = try await record.handle(request)
        let text = try String(contentsOfFile: file, encoding: .utf8)
        #expect(!text.contains("SECRET"), "\(text)")
        #expect(text.contains(#"\"id\":1"#) && text.contains("page=2") && text.contains("title=t"))
        #expect(text.contains(#"{"name":"Authorization","value":"<redacted>"}"#))
    }

    @Test("bodies over max_body are left out and marked; binary bodies are base64")
    func bodies() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/out.har"
        let inner = RecordingHandler { request in
            request.route.id == "1" ? .json(.ok, ByteBuffer(string: String(repeating: "x", count: 2000)))
                : ProxyResponse(status: .ok, headers: [.contentType: "image/png"], body: ByteBuffer(bytes: [0xFF, 0xD8, 0x00]))
        }
        let record = try recorder(inner, RecordOptions(file: file, maxBody: 1024))
        _ = try await record.handle(.getPost(1))
        _ = try await record.handle(.getPost(2))
        let contents = try entries(file).map { try #require(($0["response"] as? [String: Any])?["content"] as? [String: Any]) }
        #expect(contents[0]["text"] == nil && contents[0]["_bodyOmitted"] as? Bool == true && contents[0]["size"] as? Int == 2000)
        #expect(contents[1]["encoding"] as? String == "base64" && contents[1]["text"] as? String == "/9gA")
    }

    @Test("a failure inside is recorded as the error response the caller gets, and still thrown")
    func failures() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/out.har"
        let record = try recorder(RecordingHandler { _ in throw ProxyError.upstreamUnavailable("gone") }, RecordOptions(file: file))
        await #expect(throws: ProxyError.upstreamUnavailable("gone")) { try await record.handle(.getPost(1)) }
        let response = try #require(try entries(file).first?["response"] as? [String: Any])
        #expect(response["status"] as? Int == 502)
        #expect(((response["content"] as? [String: Any])?["text"] as? String)?.contains("upstream_unavailable") == true)
    }

    @Test("past max_file_size the file rotates to NAME.1.har, NAME.2.har; keep bounds how many; every file stays valid HAR")
    func rotation() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/out.har"
        let inner = RecordingHandler { _ in .json(.ok, ByteBuffer(string: "\"" + String(repeating: "y", count: 20_000) + "\"")) }
        let record = try recorder(inner, RecordOptions(file: file, maxFileSize: 64 << 10, keep: 2))
        for id in 1...12 { _ = try await record.handle(.getPost(id)) }
        let sizes = try [file, HARWriter.rotated(file, 1), HARWriter.rotated(file, 2)].map { try entries($0).count }
        #expect(sizes.allSatisfy { $0 >= 1 && $0 <= 3 }, "\(sizes)")
        #expect(!FileManager.default.fileExists(atPath: HARWriter.rotated(file, 3)))
        for path in [file, HARWriter.rotated(file, 1)] {
            let size = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
            #expect(size <= 64 << 10)
        }
        let newest = try entries(file).last?["_requestId"] as? String
        #expect(newest != nil)
    }

    @Test("a new writer continues a HAR file Veneer wrote; any other file is rotated out of the way, not overwritten")
    func reopening() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/out.har"
        _ = try await recorder(RecordingHandler(), RecordOptions(file: file)).handle(.getPost(1))
        _ = try await afterRelease { try recorder(RecordingHandler(), RecordOptions(file: file)) }.handle(.getPost(2))
        #expect(try entries(file).count == 2)
        let other = directory + "/other.har"
        try "not mine".write(toFile: other, atomically: true, encoding: .utf8)
        _ = try await recorder(RecordingHandler(), RecordOptions(file: other)).handle(.getPost(3))
        #expect(try entries(other).count == 1)
        #expect(try String(contentsOfFile: HARWriter.rotated(other, 1), encoding: .utf8) == "not mine")
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int)
        #expect(mode == 0o600)
    }

    @Test("options decode with defaults; bad ones are configuration errors")
    func options() throws {
        let defaults = try recordOptions("{file: staging.har}")
        #expect(defaults == RecordOptions(file: "/tmp/staging.har"))
        let custom = try recordOptions("{file: /tmp/x/s.har, max_body: 1KB, max_file_size: 1MB, keep: 0, redact_headers: [X-Key]}")
        #expect(custom == RecordOptions(file: "/tmp/x/s.har", maxBody: 1024, maxFileSize: 1 << 20, keep: 0, redactHeaders: ["x-key"]))
        #expect(throws: ConfigError.self) { try recordOptions("{}") }
        #expect(throws: ConfigError.self) { try recordOptions("{file: out.json}") }
        #expect(throws: ConfigError.self) { try recordOptions("{file: s.har, max_body: lots}") }
        #expect(throws: ConfigError.self) { try recordOptions("{file: s.har, fil: x}") }
    }

    @Test("credentials never reach the file whatever their form: lists and objects under sensitive names, JSON without a JSON type, Location, Bearer, Basic and JWT values in bodies")
    func redactionGaps() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/out.har"
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJTRUNSRVQtMTAifQ.c2lnbmF0dXJl"
        let inner = RecordingHandler { request in
            switch request.route.id {
            case "1": return .json(.ok, ByteBuffer(string: #"{"refresh_tokens":["SECRET-1","SECRET-2"],"session":{"id":"SECRET-3","n":7},"id":1}"#))
            case "2": return ProxyResponse(status: .ok, headers: [.contentType: "text/plain"], body: ByteBuffer(string: #"{"access_token":"SECRET-4"}"#))
            case "3": return ProxyResponse(status: .ok, body: ByteBuffer(string: #"{"client_secret":"SECRET-5"}"#))
            case "4": return ProxyResponse(status: .found, headers: [.location: "http://app.test/cb?access_token=SECRET-6&state=s"])
            // An upstream echoing the Authorization it received (httpbin's /headers), and
            // Basic SECRET-8:pw under a name nobody thought of.
            case "5": return .json(.ok, ByteBuffer(string: #"{"headers":{"Authorization":"Bearer SECRET-7abcdef","X-Echo":"Basic U0VDUkVULTg6cHc="}}"#))
            default: return ProxyResponse(status: .ok, headers: [.contentType: "text/plain"],
                                          body: ByteBuffer(string: "you sent Bearer SECRET-9abcdef and \(jwt), see https://x.test/?api_key=SECRET-11 now."))
            }
        }
        let record = try recorder(inner, RecordOptions(file: file))
        for id in 1...6 { _ = try await record.handle(.getPost(id)) }
        var post = ProxyRequest(method: .post, route: .list(.posts), headers: [.contentType: "text/plain"])
        post.body = ByteBuffer(string: #"{"title":"t","password":"SECRET-12"}"#)
        _ = try await record.handle(post)
        let text = try String(contentsOfFile: file, encoding: .utf8)
        for leaked in ["SECRET", "U0VDUkVU", jwt] { #expect(!text.contains(leaked), "\(leaked) in \(text)") }
        let written = try entries(file)
        func content(_ index: Int) throws -> String {
            try #require(((written[index]["response"] as? [String: Any])?["content"] as? [String: Any])?["text"] as? String)
        }
        // The shape is kept: a replaying client still finds a list and an object.
        let first = try #require(try JSONSerialization.jsonObject(with: Data(content(0).utf8)) as? [String: Any])
        #expect(first["refresh_tokens"] as? [String] == ["<redacted>", "<redacted>"])
        #expect(first["session"] as? [String: String] == ["id": "<redacted>", "n": "<redacted>"])
        #expect(first["id"] as? Int == 1)
        #expect(try content(1) == #"{"access_token":"<redacted>"}"#)
        let response = try #require(written[3]["response"] as? [String: Any])
        #expect(response["redirectURL"] as? String == "http://app.test/cb?access_token=<redacted>&state=s")
        #expect((response["headers"] as? [[String: String]])?.contains(["name": "Location", "value": "http://app.test/cb?access_token=<redacted>&state=s"]) == true)
        #expect(try content(5) == "you sent Bearer <redacted> and <redacted>, see https://x.test/?api_key=<redacted> now.")
        let posted = try #require((written[6]["request"] as? [String: Any])?["postData"] as? [String: Any])
        #expect(posted["text"] as? String == #"{"title":"t","password":"<redacted>"}"#)
    }

    /// `text` compressed by the system's gzip.
    static func gzipped(_ text: String) async throws -> [UInt8] {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try text.write(toFile: directory + "/body", atomically: true, encoding: .utf8)
        _ = try await ChildProcess.run("/usr/bin/gzip", ["-n", directory + "/body"])
        return Array(try #require(FileManager.default.contents(atPath: directory + "/body.gz")))
    }

    @Test("a compressed body is decoded before it is redacted; one Veneer cannot decode, or that decodes past max_body, is left out and marked")
    func compressedBodies() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/out.har"
        let secret = try await Self.gzipped(#"{"access_token":"SECRET-1","id":1}"#)
        let bomb = try await Self.gzipped(String(repeating: "0", count: 1 << 20))
        let inner = RecordingHandler { request in
            switch request.route.id {
            case "1": return ProxyResponse(status: .ok, headers: [.contentType: "application/json", .contentEncoding: "gzip"], body: ByteBuffer(bytes: secret))
            case "2": return ProxyResponse(status: .ok, headers: [.contentType: "application/json", .contentEncoding: "br"], body: ByteBuffer(bytes: secret))
            default: return ProxyResponse(status: .ok, headers: [.contentType: "text/plain", .contentEncoding: "gzip"], body: ByteBuffer(bytes: bomb))
            }
        }
        let record = try recorder(inner, RecordOptions(file: file))
        for id in 1...3 { _ = try await record.handle(.getPost(id)) }
        let text = try String(contentsOfFile: file, encoding: .utf8)
        #expect(!text.contains("SECRET") && !text.contains(Data(secret).base64EncodedString().prefix(12)), "\(text)")
        let contents = try entries(file).map { try #require(($0["response"] as? [String: Any])?["content"] as? [String: Any]) }
        #expect(contents[0]["text"] as? String == #"{"access_token":"<redacted>","id":1}"# && contents[0]["encoding"] == nil)
        #expect(contents[0]["size"] as? Int == 34)
        #expect(contents[1]["_bodyOmitted"] as? Bool == true && (contents[1]["comment"] as? String)?.contains("br-encoded") == true)
        #expect(contents[2]["_bodyOmitted"] as? Bool == true && (contents[2]["comment"] as? String)?.contains("max_body") == true)
    }

    @Test("the file is never opened through a symbolic link: a dangling one at the path is refused and its target never created; rotation moves links, never writes through them")
    func symbolicLinks() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/out.har"
        let target = directory + "/elsewhere.txt"
        try FileManager.default.createSymbolicLink(atPath: file, withDestinationPath: target)
        let refused = #expect(throws: HARFileError.self) { try HARWriter(path: file, maxFileSize: 1 << 20, keep: 2) }
        #expect(refused?.description.contains("symbolic link") == true, "\(String(describing: refused))")
        #expect(!FileManager.default.fileExists(atPath: target), "the link's target was created")
        try "mine".write(toFile: target, atomically: true, encoding: .utf8)
        #expect(throws: HARFileError.self) { try HARWriter(path: file, maxFileSize: 1 << 20, keep: 2) }
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "mine")
        try FileManager.default.removeItem(atPath: file)

        // A link among the rotated names is moved along, and what it points to never written.
        try FileManager.default.createSymbolicLink(atPath: HARWriter.rotated(file, 1), withDestinationPath: target)
        let inner = RecordingHandler { _ in .json(.ok, ByteBuffer(string: "\"" + String(repeating: "y", count: 40_000) + "\"")) }
        let record = try recorder(inner, RecordOptions(file: file, maxFileSize: 64 << 10, keep: 3))
        for id in 1...6 { _ = try await record.handle(.getPost(id)) }
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "mine")
        #expect(try entries(file).count >= 1)
    }

    @Test("a second writer on a file another one holds is refused, not let loose on the same offsets")
    func oneWriterPerFile() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/out.har"
        let first = try HARWriter(path: file, maxFileSize: 1 << 20, keep: 2)
        let refused = #expect(throws: HARFileError.self) { try HARWriter(path: file, maxFileSize: 1 << 20, keep: 2) }
        #expect(refused?.description.contains("another writer") == true, "\(String(describing: refused))")
        try first.append(ByteBuffer(string: "{}"))
        #expect(try entries(file).count == 1)
    }
}
