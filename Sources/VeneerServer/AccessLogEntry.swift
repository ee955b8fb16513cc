#if canImport(Glibc)
@preconcurrency import Glibc
#endif
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
    /// Who connected, as the kernel says (`peer.uid`, `peer.gid`, `peer.pid`, `peer.unit`).
    public var peer: PeerIdentity?

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

    /// Appends the line (with its newline) to `buffer`; with `trace`, the record's entries too
    /// (`"trace":[{"name":"cache","desc":"hit"},{"name":"upstream","dur_ms":12.345}]`).
    public func writeJSON(into buffer: inout ByteBuffer, trace: Bool = false) {
        buffer.writeStaticString("{\"time\":\"")
        Self.writeTime(time, into: &buffer)
        buffer.writeStaticString("\"")
        if let requestID {
            buffer.writeStaticString(",\"request_id\":")
            JSONText.writeQuoted(requestID, into: &buffer)
        }
        if let trace = record?.trace, trace.sampled {
            // The server span of its trace (`telemetry`): the line joins the trace by these.
            buffer.writeStaticString(",\"trace_id\":\"")
            buffer.writeString(trace.traceID.hex)
            buffer.writeStaticString("\",\"span_id\":\"")
            buffer.writeString(TraceContext.hex(trace.spanID))
            buffer.writeStaticString("\"")
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
            let path = String(RequestRedaction.pathWithoutQuery(target))
            buffer.writeStaticString(",\"url.path\":")
            JSONText.writeQuoted(Self.trimmed(path, to: Self.maxPath), into: &buffer)
        }
        if let protocolVersion {
            buffer.writeStaticString(",\"network.protocol.version\":\"")
            buffer.writeString(protocolVersion)
            buffer.writeStaticString("\"")
        }
        buffer.writeStaticString(",\"http.response.status_code\":")
        Self.writeDecimal(status, into: &buffer)
        buffer.writeStaticString(",\"http.request.size\":")
        Self.writeDecimal(bytesIn, into: &buffer)
        buffer.writeStaticString(",\"http.response.size\":")
        Self.writeDecimal(bytesOut, into: &buffer)
        buffer.writeStaticString(",\"duration_ms\":")
        Self.writeMilliseconds(duration, into: &buffer)
        if let record {
            if let originTime = record.originTime {
                buffer.writeStaticString(",\"origin_ms\":")
                Self.writeMilliseconds(originTime, into: &buffer)
            }
            if let cacheStatus = record.cacheStatus {
                buffer.writeStaticString(",\"cache_status\":")
                JSONText.writeQuoted(cacheStatus, into: &buffer)
            }
            if trace { Self.writeTrace(record.entries, into: &buffer) }
        }
        if let userAgent {
            buffer.writeStaticString(",\"user_agent.original\":")
            JSONText.writeQuoted(Self.trimmed(userAgent, to: Self.maxUserAgent), into: &buffer)
        }
        if let peer { Self.writePeer(peer, into: &buffer) }
        buffer.writeStaticString("}\n")
    }

    /// `,"peer.uid":1001,"peer.gid":1001,"peer.pid":4242,"peer.unit":"cron.service"`: what is known.
    static func writePeer(_ peer: PeerIdentity, into buffer: inout ByteBuffer) {
        buffer.writeStaticString(",\"peer.uid\":")
        Self.writeDecimal(Int(peer.uid), into: &buffer)
        if let gid = peer.gid {
            buffer.writeStaticString(",\"peer.gid\":")
            Self.writeDecimal(Int(gid), into: &buffer)
        }
        if let pid = peer.pid {
            buffer.writeStaticString(",\"peer.pid\":")
            Self.writeDecimal(Int(pid), into: &buffer)
        }
        if let unit = peer.unit {
            buffer.writeStaticString(",\"peer.unit\":")
            JSONText.writeQuoted(Self.trimmed(unit, to: Self.maxUserAgent), into: &buffer)
        }
    }

    /// `,"trace":[...]`: one object per entry, `name`, then `desc` and `dur_ms` when it has them.
    static func writeTrace(_ entries: [RequestRecord.Entry], into buffer: inout ByteBuffer) {
        guard !entries.isEmpty else { return }
        buffer.writeStaticString(",\"trace\":[")
        for (index, entry) in entries.enumerated() {
            buffer.writeStaticString(index == 0 ? "{\"name\":" : ",{\"name\":")
            JSONText.writeQuoted(entry.name, into: &buffer)
            if !entry.detail.isEmpty {
                buffer.writeStaticString(",\"desc\":")
                JSONText.writeQuoted(entry.detail, into: &buffer)
            }
            if let duration = entry.duration {
                buffer.writeStaticString(",\"dur_ms\":")
                writeMilliseconds(duration, into: &buffer)
            }
            buffer.writeStaticString("}")
        }
        buffer.writeStaticString("]")
    }

    // The writer formats hundreds of thousands of lines a second under load: digits are
    // written straight into the buffer, without the strings Timestamp's functions build.

    /// `2026-11-23T22:51:07.412Z` (UTC, milliseconds) for `nanoseconds` since 1970.
    static func writeTime(_ nanoseconds: Int64, into buffer: inout ByteBuffer) {
        let millis = Int(max(0, nanoseconds) / 1_000_000)
        let days = millis / 86_400_000
        let msOfDay = millis % 86_400_000
        // Days to the civil date (Howard Hinnant's algorithm, for days since 1970-01-01).
        let z = days + 719_468
        let era = z / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        writeDecimal(year, width: 4, into: &buffer)
        buffer.writeInteger(UInt8(ascii: "-"))
        writeDecimal(month, width: 2, into: &buffer)
        buffer.writeInteger(UInt8(ascii: "-"))
        writeDecimal(day, width: 2, into: &buffer)
        buffer.writeInteger(UInt8(ascii: "T"))
        writeDecimal(msOfDay / 3_600_000, width: 2, into: &buffer)
        buffer.writeInteger(UInt8(ascii: ":"))
        writeDecimal(msOfDay / 60_000 % 60, width: 2, into: &buffer)
        buffer.writeInteger(UInt8(ascii: ":"))
        writeDecimal(msOfDay / 1000 % 60, width: 2, into: &buffer)
        buffer.writeInteger(UInt8(ascii: "."))
        writeDecimal(msOfDay % 1000, width: 3, into: &buffer)
        buffer.writeInteger(UInt8(ascii: "Z"))
    }

    /// Milliseconds with three decimals: `12.345`.
    static func writeMilliseconds(_ duration: Duration, into buffer: inout ByteBuffer) {
        let parts = duration.components
        let micros = max(0, Int(parts.seconds) * 1_000_000 + Int(parts.attoseconds / 1_000_000_000_000))
        writeDecimal(micros / 1000, into: &buffer)
        buffer.writeInteger(UInt8(ascii: "."))
        writeDecimal(micros % 1000, width: 3, into: &buffer)
    }

    /// `value` (not negative) in decimal, with leading zeros up to `width` digits.
    static func writeDecimal(_ value: Int, width: Int = 1, into buffer: inout ByteBuffer) {
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                     UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &digits) { bytes in
            var rest = max(0, value)
            var count = 0
            repeat {
                bytes[19 - count] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
                count += 1
            } while rest > 0 || count < width
            buffer.writeBytes(UnsafeRawBufferPointer(rebasing: bytes[(20 - count)...]))
        }
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
