import Foundation
import NIOCore
import NIOPosix

/// A response read off the wire by ``RawHTTP``.
public struct RawResponse: Sendable {
    /// Status code.
    public let status: Int
    /// Header fields in order, names as sent.
    public let headers: [(name: String, value: String)]
    /// The body (de-chunked).
    public let body: [UInt8]

    /// The first value of a header (case-insensitive name).
    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    /// Every value of a header.
    public func headers(_ name: String) -> [String] {
        headers.filter { $0.name.lowercased() == name.lowercased() }.map(\.value)
    }

    /// The body as UTF-8 text.
    public var text: String { String(decoding: body, as: UTF8.self) }

    /// The body as a JSON object (nil when it is not one).
    public var json: [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]
    }

    /// The `error` code of a Veneer error body.
    public var errorCode: String? { json?["error"] as? String }
}

/// A deliberately dumb HTTP/1.1 client: it sends exactly the bytes it is given (so tests
/// can send paths no real client would) and reads the answer until the server closes.
public enum RawHTTP {
    /// Sends a request with `Connection: close` and reads the whole response.
    public static func request(
        port: Int, _ method: String = "GET", _ target: String, headers: [(String, String)] = [], body: String? = nil,
        host: String = "127.0.0.1"
    ) async throws -> RawResponse {
        var text = "\(method) \(target) HTTP/1.1\r\nHost: \(host):\(port)\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        if !headers.contains(where: { $0.0.lowercased() == "connection" }) { text += "Connection: close\r\n" }
        if let body, !headers.contains(where: { $0.0.lowercased() == "content-length" || $0.0.lowercased() == "transfer-encoding" }) {
            text += "Content-Length: \(body.utf8.count)\r\n"
        }
        text += "\r\n"
        var bytes = Array(text.utf8)
        if let body { bytes += Array(body.utf8) }
        return try await send(port: port, bytes, host: host)
    }

    /// Sends raw bytes and reads until the server closes (or `timeout` passes: generous, as an
    /// answer ends the wait and a loaded machine may take seconds for one).
    public static func send(port: Int, _ bytes: [UInt8], host: String = "127.0.0.1", timeout: Duration = eventuallyTimeout) async throws -> RawResponse {
        let data = try await exchange(port: port, bytes, host: host, timeout: timeout)
        return try parse(data)
    }

    /// How long a test client's connect may take: generous, as a connect that succeeds ends the
    /// wait (on loopback at once, with room in the backlog), and a loaded run left the event loops
    /// of the test process behind by more than the 5 s it was (`ConnectionAttackTests`' 500 connections).
    static let connectTimeout = TimeAmount.seconds(30)

    /// Sends raw bytes and returns everything the server sent before closing.
    public static func exchange(port: Int, _ bytes: [UInt8], host: String = "127.0.0.1", timeout: Duration = eventuallyTimeout) async throws -> [UInt8] {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(RawHTTP.connectTimeout)
            .connect(host: host, port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        return try await exchange(over: channel, bytes, timeout: timeout)
    }

    /// Sends `bytes` over a connected `channel` and returns everything read before the server closed.
    static func exchange(over channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>, _ bytes: [UInt8], timeout: Duration) async throws -> [UInt8] {
        try await withThrowingTaskGroup(of: [UInt8]?.self) { group in
            group.addTask {
                try await channel.executeThenClose { inbound, outbound in
                    try await outbound.write(ByteBuffer(bytes: bytes))
                    var received: [UInt8] = []
                    for try await chunk in inbound { received += chunk.readableBytesView }
                    return received
                }
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let received = first else {
                channel.channel.close(promise: nil)
                throw RawHTTPError.timeout
            }
            return received
        }
    }

    /// Parses one HTTP/1.1 response.
    public static func parse(_ data: [UInt8]) throws -> RawResponse {
        guard let end = find(Array("\r\n\r\n".utf8), in: data) else { throw RawHTTPError.malformed(String(decoding: data, as: UTF8.self)) }
        let head = String(decoding: data[..<end], as: UTF8.self)
        var lines = head.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else { throw RawHTTPError.malformed(head) }
        var headers: [(String, String)] = []
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        var body = Array(data[(end + 4)...])
        if headers.contains(where: { $0.0.lowercased() == "transfer-encoding" && $0.1.lowercased().contains("chunked") }) {
            body = try dechunk(body)
        } else if let length = headers.first(where: { $0.0.lowercased() == "content-length" }).flatMap({ Int($0.1) }) {
            body = Array(body.prefix(length))
        }
        return RawResponse(status: status, headers: headers, body: body)
    }

    static func dechunk(_ data: [UInt8]) throws -> [UInt8] {
        var out: [UInt8] = []
        var index = 0
        while index < data.count {
            guard let lineEnd = find(Array("\r\n".utf8), in: Array(data[index...])) else { break }
            let sizeText = String(decoding: data[index..<index + lineEnd], as: UTF8.self).split(separator: ";")[0]
            guard let size = Int(sizeText, radix: 16) else { throw RawHTTPError.malformed("bad chunk size") }
            index += lineEnd + 2
            if size == 0 { break }
            out += data[index..<min(index + size, data.count)]
            index += size + 2
        }
        return out
    }

    static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for start in 0...(haystack.count - needle.count) where haystack[start..<start + needle.count].elementsEqual(needle) {
            return start
        }
        return nil
    }
}

/// Why a raw exchange failed.
public enum RawHTTPError: Error {
    case timeout
    case malformed(String)
}
