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

    /// Waits until `path` has `count` lines (the writer is a thread of its own).
    func waitForLines(_ path: String, count: Int) async throws -> [[String: Any]] {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline, fileLines(path).count < count {
            try await Task.sleep(for: .milliseconds(20))
        }
        return fileLines(path)
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
        let logged = try await waitForLines(path, count: 44)
        #expect(logged.count == 44)
        #expect(logged.compactMap { $0["http.response.status_code"] as? Int }.sorted() == statuses.sorted())

        try FileManager.default.moveItem(atPath: path, toPath: path + ".1")
        process.signal(SIGHUP)
        // The reopen happens before the reload, both after the signal: wait for a line in the new file.
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline, fileLines(path).isEmpty {
            _ = try await RawHTTP.request(port: port, "GET", "/posts")
            try await Task.sleep(for: .milliseconds(50))
        }
        let fresh = fileLines(path)
        #expect(!fresh.isEmpty)
        let rotated = fileLines(path + ".1").count
        process.signal(SIGTERM)
        #expect(await process.wait() == 0)
        // Every request is in one file or the other, once.
        let requestsAfterRotation = fileLines(path).count
        #expect(rotated + requestsAfterRotation >= 45)
        #expect(!process.stdout.contains("http.response.status_code"), "the file, not stdout")
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
