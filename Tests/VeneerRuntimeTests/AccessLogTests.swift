import Foundation
import Testing
import VeneerConfig
import VeneerCore
import VeneerRuntime
import VeneerServer
import VeneerTestSupport

/// The lines of a JSON-lines file, parsed.
func accessLines(_ path: String) -> [[String: Any]] {
    guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
    return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
}

@Suite("The access log: one line per request, refusals included")
struct AccessLogTests {
    @Test("answers, the edge's refusals, an unreadable request and the admin API each get one line with their facts")
    func everyRequest() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/logs/access.log"
        let yaml = """
            environments:
              development:
                origin: { mock: {} }
                limits: { request_body: 1KB }
                access_log: \(path)
            """
        try await withVeneer(yaml: yaml) { (veneer: RunningVeneer) async throws in
            #expect(try await veneer.request("GET", "/posts").status == 200)
            let item = try await veneer.request("GET", "/posts?secret=abc", headers: [("User-Agent", "probe/1.0"), ("X-Request-Id", "req-42")])
            #expect(item.status == 200)
            #expect(try await veneer.request("GET", "/nope").status == 404)
            #expect(try await veneer.request("PATCH", "/posts").status == 405)
            #expect(try await veneer.request("POST", "/posts", body: String(repeating: "x", count: 2000)).status == 413)
            #expect(try await RawHTTP.send(port: veneer.port, Array("GARBAGE\r\n\r\n".utf8)).status == 400)
            #expect(try await veneer.request("GET", "/-/health").status == 200)
        }
        // Shut down: what was queued is written.
        let lines = accessLines(path)
        #expect(lines.count == 7)
        #expect(lines.compactMap { $0["http.response.status_code"] as? Int }.sorted() == [200, 200, 200, 400, 404, 405, 413])
        let item = try #require(lines.first { $0["request_id"] as? String == "req-42" })
        #expect(item["http.request.method"] as? String == "GET")
        #expect(item["http.route"] as? String == "/posts")
        #expect(item["url.path"] as? String == "/posts", "never the query")
        #expect(item["network.protocol.version"] as? String == "1.1")
        #expect(item["client.address"] as? String == "127.0.0.1")
        #expect(item["user_agent.original"] as? String == "probe/1.0")
        #expect((item["http.request.size"] as? Int ?? 0) > 50)
        #expect((item["http.response.size"] as? Int ?? 0) > 100)
        #expect(item["duration_ms"] is Double || item["duration_ms"] is Int)
        #expect((item["time"] as? String)?.hasSuffix("Z") == true)
        let refused = try #require(lines.first { $0["http.response.status_code"] as? Int == 405 })
        #expect(refused["http.route"] as? String == "/posts")
        #expect(refused["request_id"] is String)
        let unreadable = try #require(lines.first { $0["http.response.status_code"] as? Int == 400 })
        #expect(unreadable["http.request.method"] == nil && unreadable["request_id"] is String)
        #expect(lines.contains { $0["url.path"] as? String == "/-/health" })
    }

    @Test("reopen() (SIGHUP) starts a new file after the old one was moved away, as logrotate does")
    func reopenAfterRotation() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/access.log"
        let yaml = "environments: {development: {origin: {mock: {}}, access_log: \(path)}}"
        try await withVeneer(yaml: yaml) { (veneer: RunningVeneer) async throws in
            #expect(try await veneer.request("GET", "/posts").status == 200)
            // The writer is a thread of its own.
            try await eventually("the line of the first request is written") { accessLines(path).count == 1 }
            try FileManager.default.moveItem(atPath: path, toPath: path + ".1")
            veneer.instance.accessLog?.reopen()
            #expect(try await veneer.request("GET", "/posts", headers: [("X-Request-Id", "after-rotation")]).status == 200)
            try await eventually("a line in the new file") { accessLines(path).count == 1 }
            #expect(accessLines(path).first?["request_id"] as? String == "after-rotation")
            #expect(accessLines(path + ".1").count == 1)
        }
    }

    @Test("without access_log, nothing is opened and nothing is written")
    func off() async throws {
        try await withVeneer(yaml: "environments: {development: {origin: {mock: {}}}}") { (veneer: RunningVeneer) async throws in
            #expect(veneer.instance.accessLog == nil)
            #expect(try await veneer.request("GET", "/posts").status == 200)
        }
    }

    @Test("a log that cannot be opened stops the start with a configuration error naming access_log")
    func unwritable() async throws {
        let yaml = "environments: {development: {origin: {mock: {}}, access_log: /proc/veneer-no/such/access.log}}"
        await #expect(throws: ConfigError.self) {
            try await withVeneer(yaml: yaml) { _ in }
        }
    }

    @Test("the writer writes every line queued before close(), and drops (counting) what comes after")
    func closeWritesQueued() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let log = try AccessLog(output: .file(directory + "/a.log"))
        log.start()
        for index in 0..<1000 {
            log.append(AccessLogEntry(time: 0, requestID: "r\(index)", client: nil, method: .get, route: nil, target: "/x", protocolVersion: "1.1",
                                      status: 200, bytesIn: 1, bytesOut: 2, duration: .zero, record: nil, userAgent: nil))
        }
        await log.close()
        #expect(accessLines(directory + "/a.log").count == 1000)
        log.append(AccessLogEntry(time: 0, requestID: nil, client: nil, method: nil, route: nil, target: nil, protocolVersion: nil,
                                  status: 400, bytesIn: 0, bytesOut: 0, duration: .zero, record: nil, userAgent: nil))
        #expect(log.droppedLines == 1)
    }
}
