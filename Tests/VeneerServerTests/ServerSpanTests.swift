import NIOCore
import Synchronization
import Testing
import VeneerCore
@testable import VeneerHTTP1
@testable import VeneerServer

/// The server span's `server.address` and `server.port`, split from the request's authority.
@Suite("server span: host and port")
struct ServerSpanTests {
    @Test("host:port, [v6]:port and bare hosts, as the semantic conventions split them")
    func hostAndPort() {
        let cases: [(String, String, Int?)] = [
            ("api.example", "api.example", nil),
            ("api.example:8080", "api.example", 8080),
            ("127.0.0.1:0", "127.0.0.1", 0),
            ("[::1]:8443", "::1", 8443),
            ("[::1]", "::1", nil),
            ("[]", "", nil),
            // Not host:port: a bare IPv6 address, and ports that are not digits.
            ("::1", "::1", nil),
            ("api.example:", "api.example", nil),
            ("api.example:+80", "api.example", nil),
            ("api.example:http", "api.example", nil),
        ]
        for (authority, host, port) in cases {
            let split = ServerSpan.hostAndPort(authority)
            #expect(split.host == host && split.port == port, "\(authority)")
        }
        let long = ServerSpan.hostAndPort(String(repeating: "h", count: 300) + ":80")
        #expect(long.host == String(repeating: "h", count: 256) && long.port == 80, "the host's first 256 bytes")
    }

    @Test("a connection's memo encodes its attributes once, and again when a request names another authority or HTTP version")
    func memo() {
        func encoded(_ pairs: [(StaticString, String)], port: Int64? = nil) -> [UInt8] {
            [UInt8](unsafeUninitializedCapacity: 512) { buffer, count in
                var writer = SpanWriter(base: buffer.baseAddress!)
                for (key, value) in pairs.prefix(2) { writer.attribute(key, value) }
                if let port { writer.attribute("server.port", int: port) }
                for (key, value) in pairs.dropFirst(2) { writer.attribute(key, value) }
                count = writer.count
            }
        }
        var memo = ServerSpan.Memo(client: ClientAddress("192.0.2.7"))
        #expect(memo.client == encoded([("client.address", "192.0.2.7")]))
        let first = encoded([("url.scheme", "http"), ("server.address", "api.example"), ("network.protocol.version", "1.1")], port: 8080)
        #expect(memo.connection(authority: "api.example:8080", minorVersion: 1) == first)
        #expect(memo.connection(authority: "api.example:8080", minorVersion: 1) == first)
        #expect(memo.connection(authority: "other.example", minorVersion: 1)
                == encoded([("url.scheme", "http"), ("server.address", "other.example"), ("network.protocol.version", "1.1")]))
        #expect(memo.connection(authority: "other.example", minorVersion: 0)
                == encoded([("url.scheme", "http"), ("server.address", "other.example"), ("network.protocol.version", "1.0")]))
        #expect(memo.connection(authority: nil, minorVersion: 0) == encoded([("url.scheme", "http"), ("network.protocol.version", "1.0")]))
        #expect(ServerSpan.Memo(client: nil).client.isEmpty)
    }

    @Test("a connection's memo encodes the span's name, method and route once, and again when a request says another")
    func memoOfRequest() {
        func name(_ text: String) -> [UInt8] {
            [UInt8](unsafeUninitializedCapacity: 512) { buffer, count in
                var writer = SpanWriter(base: buffer.baseAddress!)
                writer.string(5, text)
                count = writer.count
            }
        }
        func encoded(_ pairs: [(StaticString, String)]) -> [UInt8] {
            [UInt8](unsafeUninitializedCapacity: 512) { buffer, count in
                var writer = SpanWriter(base: buffer.baseAddress!)
                for (key, value) in pairs { writer.attribute(key, value) }
                count = writer.count
            }
        }
        var memo = ServerSpan.Memo(client: nil)
        for (method, route) in [("GET", "/posts/{id}"), ("GET", "/posts/{id}"), ("GET", nil), ("POST", nil), ("POST", "/posts"), ("GET", "/posts")] {
            let made = memo.request(method: method, route: route)
            #expect(made.name == name(route.map { method + " " + $0 } ?? method), "\(method) \(route ?? "-")")
            var attributes: [(StaticString, String)] = [("http.request.method", method)]
            if let route { attributes.append(("http.route", route)) }
            #expect(made.attributes == encoded(attributes))
        }
    }
}

/// The server span and its children are written straight from the request's head and record
/// into the exporter's batch (``SpanWriter``): the bytes must be those of ``SpanNote``s of the
/// same attributes (the values the receiver tests decode with the official protos).
@Suite("server span: written straight from the record")
struct ServerSpanWritingTests {
    /// A sink that keeps what it is given to write.
    final class BytesSink: SpanSink {
        let sampler = TraceSampler(ratio: 1)
        private let written = Mutex<(count: Int, bytes: [UInt8])>((0, []))

        func export(count: Int, bound: Int, _ write: (inout SpanWriter) -> Void) {
            let bytes = [UInt8](unsafeUninitializedCapacity: bound) { buffer, size in
                var writer = SpanWriter(base: buffer.baseAddress!)
                write(&writer)
                precondition(writer.count <= bound, "the bound was too small")
                size = writer.count
            }
            written.withLock { $0 = ($0.count + count, $0.bytes + bytes) }
        }

        var count: Int { written.withLock { $0.count } }
        var bytes: [UInt8] { written.withLock { $0.bytes } }

        /// `spans` as ``SpanSink/export(_:)`` writes them.
        static func encoded(_ spans: [SpanNote]) -> [UInt8] {
            let sink = BytesSink()
            sink.export(spans)
            return sink.bytes
        }
    }

    static let trace = TraceContext(traceID: .init(high: 0x0af7_6519_16cd_43dd, low: 0x8448_eb21_1c80_319c), spanID: 0xb7ad_6b71_6920_3331,
                                    parentSpanID: 0x00f0_67aa_0ba9_02b7, sampled: true, traceState: "congo=t61rcWkgMzE")

    /// Each span's bytes, the span ids of the children zeroed (they are made as they are written).
    static func spans(_ bytes: [UInt8]) -> [[UInt8]] {
        var spans: [[UInt8]] = []
        var at = 0
        while at + 6 <= bytes.count {
            #expect(bytes[at] == 0x12, "a ScopeSpans.spans field")
            var length = 0
            for index in 0..<5 { length |= Int(bytes[at + 1 + index] & 0x7F) << (7 * index) }
            var span = Array(bytes[at..<min(bytes.count, at + 6 + length)])
            if !spans.isEmpty, span.count >= 34 { span.replaceSubrange(26..<34, with: repeatElement(0, count: 8)) }
            spans.append(span)
            at += 6 + length
        }
        return spans
    }

    @Test("a sampled request's server span (route, authority, agent, cache status, tracestate) and its children: the bytes of the same SpanNotes")
    func sameBytes() throws {
        let record = RequestRecord(trace: Self.trace)
        record.noteRoute("/posts/{id}")
        let place = record.place("auth_refresh")
        record.takeCachePlace()
        record.noteCacheStatus("veneer; fwd=miss; stored")
        let outgoing = try #require(record.beginOutgoing())
        record.endOutgoing(outgoing, name: "GET", attributes: [("http.response.status_code", .int(200)), ("server.address", .string("origin"))],
                           error: nil)
        record.append(.init(name: "auth_refresh", detail: "token 41s left"), at: place)
        let head = HTTP1RequestParser.Head(method: .get, target: "/posts/1?secret=1", minorVersion: 1, fields: [.userAgent: "curl/8.5.0"],
                                           authority: "api.example:8080", keepAlive: true, expectsContinue: false)
        var headers = ProxyHeaders()
        headers[.xRequestID] = "r-1234567890abcdef"
        let response = ProxyResponse(status: .ok, headers: headers)
        let client = try #require(ClientAddress("192.0.2.7"))
        let received = NIODeadline.now()
        let sink = BytesSink()
        var memo = ServerSpan.Memo(client: client)
        ServerSpan.export(head, received: received, record: record, response, requestID: nil, memo: &memo, now: received + .milliseconds(3), to: sink)
        #expect(sink.count == 4, "the server span, auth_refresh, cache, the upstream request")

        let written = Self.spans(sink.bytes)
        try #require(written.count == 4)
        // The server span as a SpanNote of the semantic conventions' attributes (its times,
        // read from the clock as it is made, compared apart).
        let server = SpanNote(name: "GET /posts/{id}", kind: .server, traceID: Self.trace.traceID, spanID: Self.trace.spanID,
                              parentSpanID: Self.trace.parentSpanID, start: 0, end: 0, attributes: [
                                  ("http.request.method", .string("GET")), ("http.route", .string("/posts/{id}")), ("url.path", .string("/posts/1")),
                                  ("url.scheme", .string("http")), ("server.address", .string("api.example")), ("server.port", .int(8080)),
                                  ("network.protocol.version", .string("1.1")), ("user_agent.original", .string("curl/8.5.0")),
                                  ("http.response.status_code", .int(200)), ("client.address", .string("192.0.2.7")),
                                  ("veneer.request_id", .string("r-1234567890abcdef")), ("veneer.cache_status", .string("veneer; fwd=miss; stored")),
                              ], traceState: "congo=t61rcWkgMzE")
        let expected = Self.spans(BytesSink.encoded([server] + record.childSpans))
        /// The span with its start and end zeroed: they follow its kind (`server`).
        func withoutTimes(_ span: [UInt8]) -> [UInt8] {
            var span = span
            guard let at = span.indices.dropLast(20).first(where: { Array(span[$0..<($0 + 3)]) == [0x30, 0x02, 0x39] }),
                  span[at + 11] == 0x41 else { return [] }
            span.replaceSubrange((at + 3)..<(at + 11), with: repeatElement(0, count: 8))
            span.replaceSubrange((at + 12)..<(at + 20), with: repeatElement(0, count: 8))
            return span
        }
        #expect(!withoutTimes(written[0]).isEmpty)
        #expect(withoutTimes(written[0]) == withoutTimes(expected[0]), "the server span")
        #expect(Array(written[1...]) == Array(expected[1...]), "its children")
    }

    @Test("a refusal of what could not be read as a request: a root span named HTTP, its error the refusal's code")
    func refusal() {
        let sink = BytesSink()
        var body = ByteBuffer()
        body.writeString(#"{"error":"bad_request","message":"x"}"#)
        ServerSpan.exportUnread(ProxyResponse(status: .badRequest, body: body), client: nil, now: .now(), to: sink)
        #expect(sink.count == 1)
        let span = Self.spans(sink.bytes).first ?? []
        #expect(span.count > 40)
        let text = String(decoding: span, as: UTF8.self)
        #expect(text.contains("HTTP") && text.contains("veneer.refusal") && text.contains("bad_request"))
    }
}
