import Foundation
import NIOCore
import Testing
import VeneerCore
@testable import VeneerServer

@Suite("Access log lines")
struct AccessLogEntryTests {
    func line(_ entry: AccessLogEntry) -> String {
        var buffer = ByteBuffer()
        entry.writeJSON(into: &buffer)
        return String(buffer: buffer)
    }

    @Test("OpenTelemetry names, the time in UTC, no query, the chain's notes")
    func fields() {
        let record = RequestRecord()
        record.noteCacheStatus("veneer; fwd=miss")
        record.noteOrigin("upstream", time: .milliseconds(3))
        let entry = AccessLogEntry(
            time: 1_795_000_000_123_000_000, requestID: "abc", client: ClientAddress("::1"), method: .get, route: "/posts/{id}",
            target: "/posts/7?token=secret", protocolVersion: "1.1", status: 200, bytesIn: 80, bytesOut: 300,
            duration: .microseconds(4500), record: record, userAgent: "curl/8.0")
        #expect(line(entry) == """
            {"time":"2026-11-18T11:06:40.123Z","request_id":"abc","client.address":"::1","http.request.method":"GET",\
            "http.route":"/posts/{id}","url.path":"/posts/7","network.protocol.version":"1.1","http.response.status_code":200,\
            "http.request.size":80,"http.response.size":300,"duration_ms":4.500,"origin_ms":3.000,\
            "cache_status":"veneer; fwd=miss","user_agent.original":"curl/8.0"}

            """)
    }

    @Test("at debug level a line carries the record's entries in order: name, desc and dur_ms when they have them; at info it does not")
    func trace() {
        let record = RequestRecord(tracing: .log)
        let latency = record.place("latency_log")
        record.takeCachePlace()
        record.append(.init(name: "auth_refresh", detail: "token 41s left"))
        record.noteCacheStatus("veneer; fwd=uri-miss; fwd-status=200; stored")
        record.noteOrigin("upstream", time: .microseconds(12_345))
        record.append(.init(name: "latency_log", detail: "", duration: .microseconds(15_000)), at: latency)
        let entry = AccessLogEntry(time: 0, requestID: "r", client: nil, method: .get, route: "/posts/{id}", target: "/posts/1",
                                   protocolVersion: "1.1", status: 200, bytesIn: 1, bytesOut: 1, duration: .zero, record: record, userAgent: nil)
        var buffer = ByteBuffer()
        entry.writeJSON(into: &buffer, trace: true)
        let expected = #""cache_status":"veneer; fwd=uri-miss; fwd-status=200; stored","trace":[{"name":"latency_log","dur_ms":15.000},"#
            + #"{"name":"cache","desc":"miss stored"},{"name":"auth_refresh","desc":"token 41s left"},{"name":"upstream","dur_ms":12.345}]}"#
        #expect(String(buffer: buffer).contains(expected))
        #expect(!line(entry).contains("trace"))
    }

    @Test("a refusal of what was not a request has only what is known")
    func refusal() {
        let entry = AccessLogEntry(time: 0, requestID: "r", client: nil, method: nil, route: nil, target: nil, protocolVersion: nil,
                                   status: 400, bytesIn: 0, bytesOut: 120, duration: .zero, record: nil, userAgent: nil)
        #expect(line(entry) == """
            {"time":"1970-01-01T00:00:00.000Z","request_id":"r","http.response.status_code":400,"http.request.size":0,\
            "http.response.size":120,"duration_ms":0.000}

            """)
    }

    @Test("a long User-Agent is trimmed on a character boundary; quotes and controls are escaped")
    func trimmedAndEscaped() {
        let agent = String(repeating: "a", count: 255) + "é" + String(repeating: "b", count: 100)
        let entry = AccessLogEntry(time: 0, requestID: "r\"1", client: nil, method: .get, route: nil, target: "/x", protocolVersion: "1.0",
                                   status: 404, bytesIn: 1, bytesOut: 1, duration: .zero, record: nil, userAgent: agent)
        let text = line(entry)
        #expect(text.contains(#""request_id":"r\"1""#))
        #expect(text.contains("\"user_agent.original\":\"" + String(repeating: "a", count: 255) + "...\""))
    }
}

@Suite("Access log times")
struct AccessLogTimeTests {
    @Test("the time written by hand is the one Timestamp formats, across leap days, years and centuries")
    func sameAsTimestamp() {
        let seconds: [Int64] = [0, 59, 86_399, 951_782_400, 951_868_799, 1_709_164_800, 1_735_689_599, 4_107_542_400, 4_102_444_799]
        for second in seconds {
            for millis: Int64 in [0, 1, 999] {
                var buffer = ByteBuffer()
                AccessLogEntry.writeTime((second * 1000 + millis) * 1_000_000, into: &buffer)
                let date = Date(timeIntervalSince1970: Double(second) + Double(millis) / 1000 + 0.0001)
                #expect(String(buffer: buffer) == Timestamp.iso8601(date), "\(second).\(millis)")
            }
        }
    }
}
