import Foundation
import HTTPTypes
import NIOCore
import VeneerCore

/// The facts of one request as the connection saw it: gathered on the event loop as the
/// answer is written (no formatting there), turned into a JSON line by the ``AccessLog``'s
/// writer.
///
/// Field names follow the OpenTelemetry HTTP semantic conventions where they define one
/// (`http.request.method`, `url.path`, `http.route`, `http.response.status_code`,
/// `client.address`, `user_agent.original`, `network.protocol.version`, `http.request.size`,
/// `http.response.size`); the rest are Veneer's and match `latency_log` (`time`,
/// `request_id`, `duration_ms`, `cache_status`, `origin_ms`). Never a query string, a
/// body, `Authorization` or `Cookie`.
public struct AccessLogEntry: Sendable {
    /// When the answer was written, in nanoseconds since 1970.
    public var time: Int64
    /// The request id the answer carried.
    public var requestID: String?
    /// The client, if known.
    public var client: ClientAddress?
    /// The method; nil for a request refused before its request line was read.
    public var method: HTTPRequest.Method?
    /// The route template (`/posts/{id}`), when the path named one.
    public var route: String?
    /// The request target as sent (its query is not logged).
    public var target: String?
    /// `1.0` or `1.1`; nil without a request line.
    public var protocolVersion: String?
    /// The status sent.
    public var status: Int
    /// Bytes of the request read: its head and its body.
    public var bytesIn: Int
    /// Bytes of the answer written (0 when the client had left).
    public var bytesOut: Int
    /// From the request read whole to its answer written.
    public var duration: Duration
    /// What the chain noted: the cache status, the time spent in the origin.
    public var record: RequestRecord?
    /// `User-Agent`, as sent.
    public var userAgent: String?

    /// An entry.
    public init(time: Int64, requestID: String?, client: ClientAddress?, method: HTTPRequest.Method?, route: String?, target: String?,
                protocolVersion: String?, status: Int, bytesIn: Int, bytesOut: Int, duration: Duration, record: RequestRecord?,
                userAgent: String?) {
        self.time = time
        self.requestID = requestID
        self.client = client
        self.method = method
        self.route = route
        self.target = target
        self.protocolVersion = protocolVersion
        self.status = status
        self.bytesIn = bytesIn
        self.bytesOut = bytesOut
        self.duration = duration
        self.record = record
        self.userAgent = userAgent
    }

    /// The wall clock now, as ``time`` takes it.
    public static func now() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec)
    }

    /// The longest path written; longer ones end in `...`.
    static let maxPath = 512
    /// The longest `User-Agent` written; longer ones end in `...`.
    static let maxUserAgent = 256

    /// Appends the line (with its newline) to `buffer`.
    public func writeJSON(into buffer: inout ByteBuffer) {
        buffer.writeStaticString("{\"time\":\"")
        buffer.writeString(Timestamp.iso8601(Date(timeIntervalSince1970: Double(time / 1_000_000) / 1000)))
        buffer.writeStaticString("\"")
        if let requestID {
            buffer.writeStaticString(",\"request_id\":")
            JSONText.writeQuoted(requestID, into: &buffer)
        }
        if let client {
            buffer.writeStaticString(",\"client.address\":\"")
            buffer.writeString(client.description)
            buffer.writeStaticString("\"")
        }
        if let method {
            buffer.writeStaticString(",\"http.request.method\":")
            JSONText.writeQuoted(method.rawValue, into: &buffer)
        }
        if let route {
            buffer.writeStaticString(",\"http.route\":")
            JSONText.writeQuoted(route, into: &buffer)
        }
        if let target {
            let path = target.utf8.firstIndex(of: UInt8(ascii: "?")).map { String(target[..<$0]) } ?? target
            buffer.writeStaticString(",\"url.path\":")
            JSONText.writeQuoted(Self.trimmed(path, to: Self.maxPath), into: &buffer)
        }
        if let protocolVersion {
            buffer.writeStaticString(",\"network.protocol.version\":\"")
            buffer.writeString(protocolVersion)
            buffer.writeStaticString("\"")
        }
        buffer.writeStaticString(",\"http.response.status_code\":")
        buffer.writeString(String(status))
        buffer.writeStaticString(",\"http.request.size\":")
        buffer.writeString(String(bytesIn))
        buffer.writeStaticString(",\"http.response.size\":")
        buffer.writeString(String(bytesOut))
        buffer.writeStaticString(",\"duration_ms\":")
        buffer.writeString(Timestamp.milliseconds(duration))
        if let record {
            if let originTime = record.originTime {
                buffer.writeStaticString(",\"origin_ms\":")
                buffer.writeString(Timestamp.milliseconds(originTime))
            }
            if let cacheStatus = record.cacheStatus {
                buffer.writeStaticString(",\"cache_status\":")
                JSONText.writeQuoted(cacheStatus, into: &buffer)
            }
        }
        if let userAgent {
            buffer.writeStaticString(",\"user_agent.original\":")
            JSONText.writeQuoted(Self.trimmed(userAgent, to: Self.maxUserAgent), into: &buffer)
        }
        buffer.writeStaticString("}\n")
    }

    /// At most `limit` bytes of `text`, cut on a character boundary, with `...` when cut.
    static func trimmed(_ text: String, to limit: Int) -> String {
        guard text.utf8.count > limit else { return text }
        let bytes = Array(text.utf8)
        var end = limit
        // Not inside a character: back to the byte that starts one.
        while end > 0, bytes[end] & 0xC0 == 0x80 { end -= 1 }
        return String(decoding: bytes[..<end], as: UTF8.self) + "..."
    }
}
