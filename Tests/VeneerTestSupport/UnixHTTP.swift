import Foundation
import NIOCore
import NIOPosix

/// ``RawHTTP`` over a Unix domain socket: one request with `Connection: close`, the answer
/// read until the server closes.
public enum UnixHTTP {
    /// Sends `method target` to the socket at `path` and reads the whole response.
    public static func request(socket path: String, _ method: String = "GET", _ target: String, headers: [(String, String)] = [],
                               host: String = "localhost", timeout: Duration = eventuallyTimeout) async throws -> RawResponse {
        var text = "\(method) \(target) HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        text += "\r\n"
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(RawHTTP.connectTimeout)
            .connect(unixDomainSocketPath: path) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        let received = try await RawHTTP.exchange(over: channel, Array(text.utf8), timeout: timeout)
        return try RawHTTP.parse(received)
    }
}
