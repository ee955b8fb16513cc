import Foundation
import Testing
import VeneerTestSupport

@Suite("veneer run --log-format")
struct LogFormatProcessTests {
    @Test("json: every stderr line is a JSON object; a failed reload is a line at level error")
    func json() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "environments: {development: {origin: {mock: {}}}}".write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0", "--log-format", "json"], directory: directory)
        defer { process.terminate() }
        func objects() -> [[String: Any]] {
            process.stderr.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        }
        var port: Int?
        try await eventually("the JSON line saying ready") {
            port = objects().first { $0["message"] as? String == "veneer ready" }.flatMap { ($0["port"] as? String).flatMap(Int.init) }
            return port != nil || !process.process.isRunning
        }
        let ready = try #require(port, "\(process.stderr)")
        #expect(try await RawHTTP.request(port: ready, "GET", "/posts").status == 200)

        try "environments: {development: {origin: {mock: {}}, chain: [nonsense]}}".write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        process.signal(SIGHUP)
        try await eventually("the reload failed") { objects().contains { ($0["message"] as? String)?.hasPrefix("reload failed") == true } }
        process.signal(SIGTERM)
        #expect(await process.wait() == 0)
        let lines = process.stderr.split(separator: "\n")
        #expect(!lines.isEmpty && lines.count == objects().count, "every line is JSON:\n\(process.stderr)")
        let failed = try #require(objects().first { ($0["message"] as? String)?.hasPrefix("reload failed") == true })
        #expect(failed["level"] as? String == "error" && failed["label"] as? String == "veneer.runtime")
    }

    @Test("an unknown format is a usage error")
    func unknown() async throws {
        let result = try await VeneerProcess.run(["run", "--log-format", "xml", "--listen", "127.0.0.1:0"])
        #expect(result.status == 64)
        #expect(result.stderr.contains("unknown log format 'xml'"))
    }

    @Test("under the journal (JOURNAL_STREAM names stderr) a configuration error at start is at error priority; otherwise unprefixed")
    func journalPriorities() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "environments: {development: {origin: {mock: {}}, chain: [nonsense]}}".write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        for journal in [true, false] {
            // stderr is a file here, as the journal's stream is a socket: what counts is its device and inode.
            let path = directory + "/stderr-\(journal)"
            _ = FileManager.default.createFile(atPath: path, contents: nil)
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
            var status = stat()
            #expect(fstat(handle.fileDescriptor, &status) == 0)
            var variables = ProcessInfo.processInfo.environment
            variables["JOURNAL_STREAM"] = journal ? "\(status.st_dev):\(status.st_ino)" : nil
            let process = try ChildProcess(VeneerProcess.binary, ["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0"],
                                           directory: directory, environment: variables, error: .descriptor(handle.fileDescriptor))
            let exit = await process.waitUntilExit()
            try handle.close()
            #expect(exit == 78, "a configuration error")
            let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
            #expect(!lines.isEmpty)
            if journal {
                #expect(lines.allSatisfy { $0.range(of: #"^<[0-7]>"#, options: .regularExpression) != nil }, "\(lines)")
                #expect(lines.contains { $0.hasPrefix("<3>") && $0.contains("unknown decorator 'nonsense'") }, "\(lines)")
            } else {
                #expect(!lines.contains { $0.hasPrefix("<") }, "\(lines)")
            }
        }
    }
}

extension LogFormatProcessTests {
    @Test("at debug level the services are named by what they do, never dumped as Swift values")
    func debugNamesServices() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "environments: {development: {origin: {mock: {}}, access_log: stdout, chain: [latency_log, cache]}}"
            .write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--listen", "127.0.0.1:0", "--log-level", "debug"], directory: directory)
        defer { process.terminate() }
        let port = try await process.waitUntilReady()
        #expect(try await RawHTTP.request(port: port, "GET", "/posts").status == 200)
        process.signal(SIGTERM)
        #expect(await process.wait() == 0)
        let log = process.stderr
        for named in ["sl-service=the Veneer instance serving development (veneer.yaml)", "sl-service=the listener on 127.0.0.1:0",
                      "sl-service=systemd watchdog (off: no WATCHDOG_USEC)", "sl-service=the access log writer (stdout)",
                      "sl-service=the background loops of the decorators", "sl-service=SIGHUP: reload the configuration"] {
            #expect(log.contains(named), "\(named)")
        }
        // A dump reads `TypeName(field: value, ...)`: what WatchdogService(notifier: ...) looked like.
        let dump = try Regex(#"[A-Z][A-Za-z]+\([a-z][A-Za-z]*: "#)
        for line in log.split(separator: "\n") { #expect(line.firstMatch(of: dump) == nil, "\(line)") }
        #expect(!log.contains("\\'"), "no escaped debug descriptions")
    }
}
