import NIOCore
import NIOEmbedded
import Testing
import VeneerCore
@testable import VeneerServer
import VeneerTestSupport

/// The one rule for closing after a refusal, through a connection handler on an embedded
/// channel: a request whose body was not read whole is its connection's last.
@Suite("One rule for closing after a refusal")
struct ClosingRuleTests {
    @Test("a request whose body was left unread (over the limit) is its connection's last, whatever answers it; nothing behind it is answered",
          arguments: [
              ("/posts", "x", "413"), ("/nothing", "x", "404"), ("/posts/1", "x", "405"), ("/-/health", "x", "413"), ("/posts", "evil.example", "421"),
          ])
    func bodyLeftUnread(_ target: String, _ host: String, _ status: String) async throws {
        let (channel, loop) = try await embeddedConnection([AnswersAtOnce()], bodyLimit: 8)
        try channel.writeInbound(ByteBuffer(string: "POST \(target) HTTP/1.1\r\nHost: \(host)\r\nContent-Length: 100\r\n\r\n0123456789"
            + "GET /posts HTTP/1.1\r\nHost: x\r\n\r\n"))
        loop.run()
        var text = ""
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) { text += String(buffer: buffer) }
        #expect(text.hasPrefix("HTTP/1.1 \(status) ") && text.contains("\r\nConnection: close\r\n"), "\(text)")
        #expect(text.components(separatedBy: "HTTP/1.1 ").count == 2, "nothing behind it is answered")
        _ = try? channel.finish()
    }

    @Test("a refusal of a request read whole keeps the connection open for the next")
    func bodyReadWhole() async throws {
        let (channel, loop) = try await embeddedConnection([AnswersAtOnce()], bodyLimit: 8)
        try channel.writeInbound(ByteBuffer(string: "POST /nothing HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}GET /posts HTTP/1.1\r\nHost: x\r\n\r\n"))
        loop.run()
        var text = ""
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) { text += String(buffer: buffer) }
        #expect(text.hasPrefix("HTTP/1.1 404 ") && !text.contains("Connection: close") && text.contains("HTTP/1.1 200 "), "\(text)")
        _ = try? channel.finish()
    }
}
