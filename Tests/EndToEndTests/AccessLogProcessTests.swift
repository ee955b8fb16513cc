import Foundation
import Testing
import VeneerTestSupport

@Suite("The access log of the real binary")
struct AccessLogProcessTests {
    /// The JSON lines of `text`.
    func lines(_ text: String) -> [[String: Any]] {
        text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    func fileLines(_ path: String) -> [[String: Any]] {
        lines((try? String(contentsOfFile: path, encoding: .utf8)) ?? "")
    }

    /// 29 answers and 15 refusals by Veneer itself (400, 404, 405, 413): the 44 requests of the issue.
    func sendMix(port: Int) async throws -> [Int] {
        var statuses: [Int] = []
        for id in 1...25 { statuses.append(try await RawHTTP.request(port: port, "GET", "/posts?page=\(id)").status) }
        for _ in 0..<4 { statuses.append(try await RawHTTP.request(port: port, "GET", "/posts").status) }
        for _ in 0..<4 { statuses.append(try await RawHTTP.request(port: port, "GET", "/nothing/here").status) }
        for _ in 0..<4 { statuses.append(try await RawHTTP.request(port: port, "DELETE", "/posts").status) }
        for _ in 0..<4 { statuses.append(try await RawHTTP.request(port: port, "POST", "/posts", body: String(repeating: "x", count: 4096)).status) }
        for _ in 0..<3 { statuses.append(try await RawHTTP.send(port: port, Array("NOT A REQUEST\r\n\r\n".utf8)).status) }
        return statuses
    }

    @Test("one line per request, Veneer's own refusals included; SIGHUP reopens the file after rotation")
    func everyRequestToAFile() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try """
            environments:
              development:
                origin: { mock: {} }
                limits: { request_body: 1KB }
                access_log: logs/access.log
            """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
        defer { process.terminate() }
        let port = try await process.waitUntilReady()
        let path = directory + "/logs/access.log"

        let statuses = try await sendMix(port: port)
        #expect(statuses.count == 44)
        #expect(statuses.filter { [400, 404, 405, 413].contains($0) }.count == 15)
        // The writer is a thread of its own.
        try await eventually("44 lines are written (\(fileLines(path).count) so far)") { fileLines(path).count >= 44 }
        let logged = fileLines(path)
        #expect(logged.count == 44)
        #expect(logged.compactMap { $0["http.response.status_code"] as? Int }.sorted() == statuses.sorted())

        try FileManager.default.moveItem(atPath: path, toPath: path + ".1")
        process.signal(SIGHUP)
        // The reopen happens before the reload, both after the signal: a request at each look
        // until one is logged in the new file.
        try await eventually("a line in the new file") {
            _ = try await RawHTTP.request(port: port, "GET", "/posts")
            return !fileLines(path).isEmpty
        }
        let rotated = fileLines(path + ".1").count
        process.signal(SIGTERM)
        #expect(await process.wait() == 0)
        // Every request is in one file or the other, once.
        let requestsAfterRotation = fileLines(path).count
        #expect(rotated + requestsAfterRotation >= 45)
        #expect(!process.stdout.contains("http.response.status_code"), "the file, not stdout")
    }

    @Test("a 408 for a body that stopped arriving is logged with its method, route, path, request id and the bytes read; a slow head with none")
    func bodyTimeout() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try """
            environments:
              development:
                origin: { mock: {} }
                limits: { body_timeout: 300ms, header_timeout: 300ms }
                access_log: access.log
            """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
        defer { process.terminate() }
        let port = try await process.waitUntilReady()
        let head = "PUT /posts/7?secret=1 HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nX-Request-Id: slow-body-1\r\nContent-Length: 100\r\n\r\n"
        let body = try await RawConnection.connect(port: port)
        defer { body.close() }
        try await body.send(head + #"{"title":"#)
        let timedOut = try #require(try await body.responses(1).first)
        #expect(timedOut.status == 408 && timedOut.header("X-Request-Id") == "slow-body-1")
        // A head that never ends: nothing of the request is known.
        let slowHead = try await RawConnection.connect(port: port)
        defer { slowHead.close() }
        try await slowHead.send("GET /posts/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        #expect(try await slowHead.responses(1).first?.status == 408)

        try await eventually("both 408s are logged") { fileLines(directory + "/access.log").count >= 2 }
        let logged = fileLines(directory + "/access.log")
        let line = try #require(logged.first { $0["request_id"] as? String == "slow-body-1" })
        #expect(line["http.response.status_code"] as? Int == 408)
        #expect(line["http.request.method"] as? String == "PUT")
        #expect(line["http.route"] as? String == "/posts/{id}")
        #expect(line["url.path"] as? String == "/posts/7", "the path, without its query")
        #expect(line["http.request.size"] as? Int == head.utf8.count + #"{"title":"#.utf8.count)
        let other = try #require(logged.first { $0["request_id"] as? String != "slow-body-1" })
        #expect(other["http.response.status_code"] as? Int == 408 && other["http.request.method"] == nil && other["url.path"] == nil)
        process.signal(SIGTERM)
        #expect(await process.wait() == 0)
    }

    @Test("access_log: stdout writes the lines to standard output; off by default writes none")
    func standardOutput() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "environments: {development: {origin: {mock: {}}, access_log: stdout}, quiet: {origin: {mock: {}}}}"
            .write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
        defer { process.terminate() }
        let port = try await process.waitUntilReady()
        #expect(try await RawHTTP.request(port: port, "GET", "/posts").status == 200)
        #expect(try await RawHTTP.request(port: port, "GET", "/missing").status == 404)
        process.signal(SIGTERM)
        #expect(await process.wait() == 0)
        #expect(lines(process.stdout).compactMap { $0["http.response.status_code"] as? Int } == [200, 404])

        let quiet = try VeneerProcess(["run", "--config", "veneer.yaml", "-e", "quiet", "--listen", "127.0.0.1:0"], directory: directory)
        defer { quiet.terminate() }
        let quietPort = try await quiet.waitUntilReady()
        #expect(try await RawHTTP.request(port: quietPort, "GET", "/posts").status == 200)
        quiet.signal(SIGTERM)
        #expect(await quiet.wait() == 0)
        #expect(!quiet.stdout.contains("http.response.status_code"))
    }
}
