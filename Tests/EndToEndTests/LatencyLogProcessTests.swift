import Foundation
import Testing
import VeneerTestSupport

@Suite("latency_log's file in the real binary")
struct LatencyLogProcessTests {
    func lines(_ path: String) -> [Substring] {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n")
    }

    @Test("every request's line is in the file once, in order: after SIGHUP in the new file, and SIGTERM writes what was queued before the exit")
    func rotationAndStop() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try """
            environments:
              development:
                origin: { mock: {} }
                chain:
                  - latency_log: { file: logs/latency.log }
            """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"], directory: directory)
        defer { process.terminate() }
        let port = try await process.waitUntilReady()
        let path = directory + "/logs/latency.log"

        // Each request's id is in its path (the mock answers 200 or 404: both are logged).
        for id in 1...50 { _ = try await RawHTTP.request(port: port, "GET", "/posts/\(id)") }
        try await eventually("50 lines are written (\(lines(path).count) so far)") { lines(path).count >= 50 }
        try FileManager.default.moveItem(atPath: path, toPath: path + ".1")
        process.signal(SIGHUP)
        // The reopen comes with the reload, after the signal: a request at each look until
        // one is logged in the new file.
        var sent = 50
        try await eventually("a line in the new file") {
            sent += 1
            _ = try await RawHTTP.request(port: port, "GET", "/posts/\(sent)")
            return !lines(path).isEmpty
        }
        // The last requests' lines are still queued when the signal comes, at most 10 ms old.
        for _ in 0..<200 {
            sent += 1
            _ = try await RawHTTP.request(port: port, "GET", "/posts/\(sent)")
        }
        process.signal(SIGTERM)
        #expect(await process.wait() == 0)
        let ids = (lines(path + ".1") + lines(path)).compactMap { line -> Int? in
            guard let range = line.range(of: #""path":"/posts/"#) else { return nil }
            return Int(line[range.upperBound...].prefix { $0.isNumber })
        }
        #expect(ids == Array(1...sent), "every request once, in order, across both files")
    }
}
