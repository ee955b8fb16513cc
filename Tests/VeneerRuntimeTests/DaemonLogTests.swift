import Foundation
import Logging
import Synchronization
import Testing
import VeneerCore
@testable import VeneerRuntime

/// Lines a handler wrote.
final class LineBox: Sendable {
    private let lines = Mutex<[String]>([])
    func add(_ bytes: [UInt8]) { lines.withLock { $0.append(String(decoding: bytes, as: UTF8.self)) } }
    var all: [String] { lines.withLock { $0 } }
}

@Suite("The daemon's log lines: journald priorities, text or JSON, no struct dumps")
struct DaemonLogTests {
    func logger(_ format: LogFormat, journal: Bool, _ box: LineBox) -> Logger {
        Logger(label: "veneer.test") { label in
            var handler = DaemonLogHandler(label: label, format: format, journal: journal) { box.add($0) }
            handler.logLevel = .debug
            return handler
        }
    }

    @Test("under the journal each line starts with its syslog priority, so that journalctl -p err finds errors")
    func priorities() {
        let box = LineBox()
        let log = logger(.text, journal: true, box)
        log.error("reload failed; the previous configuration keeps serving", metadata: ["problems": "1"])
        log.warning("w")
        log.notice("n")
        log.info("i")
        log.debug("d")
        log.critical("c")
        #expect(box.all.map { String($0.prefix(3)) } == ["<3>", "<4>", "<5>", "<6>", "<7>", "<2>"])
        #expect(box.all[0].hasSuffix("error veneer.test: problems=1 [VeneerRuntimeTests] reload failed; the previous configuration keeps serving\n"))
    }

    @Test("without the journal, lines are as swift-log's stream handler writes them (no prefix)")
    func plainText() {
        let box = LineBox()
        logger(.text, journal: false, box).info("veneer ready", metadata: ["port": "8080"])
        let line = box.all[0]
        #expect(line.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} info veneer.test: port=8080 \[VeneerRuntimeTests\] veneer ready\n$"#,
                            options: .regularExpression) != nil, "\(line)")
    }

    @Test("--log-format json: one object per line with the metadata as members")
    func json() throws {
        let box = LineBox()
        logger(.json, journal: true, box).error("refresh token rejected; refreshing stopped", metadata: ["reason": "invalid_grant", "n": .stringConvertible(3)])
        let line = box.all[0]
        #expect(line.hasPrefix("<3>{"))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.dropFirst(3).utf8)) as? [String: Any])
        #expect(object["level"] as? String == "error")
        #expect(object["label"] as? String == "veneer.test")
        #expect(object["message"] as? String == "refresh token rejected; refreshing stopped")
        #expect(object["reason"] as? String == "invalid_grant" && object["n"] as? String == "3")
        #expect((object["time"] as? String)?.hasSuffix("Z") == true)
    }

    @Test("JOURNAL_STREAM counts only when it names standard error's own device and inode")
    func journalStream() {
        var status = stat()
        #expect(fstat(2, &status) == 0)
        #expect(DaemonLogHandler.standardErrorIsJournal(variables: ["JOURNAL_STREAM": "\(status.st_dev):\(status.st_ino)"]))
        #expect(!DaemonLogHandler.standardErrorIsJournal(variables: ["JOURNAL_STREAM": "\(status.st_dev):\(status.st_ino + 1)"]))
        #expect(!DaemonLogHandler.standardErrorIsJournal(variables: [:]))
        #expect(!DaemonLogHandler.standardErrorIsJournal(variables: ["JOURNAL_STREAM": "nonsense"]))
    }

    struct Opaque: Error {
        let secret = "do-not-print"
        let code = 7
    }

    struct Described: Error, CustomStringConvertible {
        var description: String { "the store is read-only" }
    }

    @Test("errors are logged by what they say of themselves, never as a dump of their fields")
    func errorText() {
        #expect(ErrorText.describe(Opaque()) == "Opaque")
        #expect(ErrorText.describe(Described()) == "the store is read-only")
        #expect(!ErrorText.describe(Opaque()).contains("do-not-print"))
    }
}
