import Foundation
import HTTPTypes
import HummingbirdCore
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization
import VeneerConfig
import VeneerCore

/// One HTTP/1.1 listener (Hummingbird's server) in front of a ``ProxyEdge``.
enum Listener {
    static func make(
        address: ListenAddress, edge: ProxyEdge, headerLimit: Int, eventLoopGroup: any EventLoopGroup,
        logger: Logger, onBound: @escaping @Sendable (Int) async -> Void
    ) -> any Service {
        let dates = HTTPDateCache()
        let responder: HTTPChannelHandler.Responder = { request, writer, channel in
            let client = ClientAddress(channel.remoteAddress)
            let method = request.head.method
            let (response, refusedBody) = await edge.respond(to: request, client: client)
            var (head, body) = finalize(response, method: method, dates: dates)
            // Hummingbird closes only on exactly "Connection: close"; any list naming close counts.
            let clientCloses = request.head.headerFields[.connection].map(Self.namesClose) ?? false
            let closeConnection = refusedBody || clientCloses
            if closeConnection { head.headerFields[.connection] = "close" }
            try await writer.write(response: head, body: ResponseBody(byteBuffer: body))
            if closeConnection {
                // The client may still be sending a body we refused: do not read it.
                try? await channel.close()
            }
        }
        let configuration = HTTP1Channel.Configuration(
            idleTimeout: .seconds(75),
            httpDecoderConfiguration: .init(maxHeaderFieldSize: headerLimit, maxHeaderListSize: headerLimit, maxHeaderFieldCount: 200))
        return Server(
            childChannelSetup: HTTP1Channel(responder: responder, configuration: configuration),
            configuration: ServerConfiguration(address: .hostname(address.host, port: address.port), backlog: 1024),
            onServerRunning: { channel in await onBound(channel.localAddress?.port ?? address.port) },
            eventLoopGroup: eventLoopGroup,
            logger: logger)
    }

    /// Whether a `Connection` header value lists `close`.
    static func namesClose(_ value: String) -> Bool {
        value.split(separator: ",").contains { $0.trimmingSpaces.lowercased() == "close" }
    }

    /// The response as it goes on the wire: no hop-by-hop fields, `Content-Length` from the
    /// body, no body for HEAD, 204 and 304, a `Date` when the upstream gave none.
    static func finalize(_ response: ProxyResponse, method: HTTPRequest.Method, dates: HTTPDateCache) -> (HTTPResponse, ByteBuffer) {
        var headers = response.headers
        HopByHop.strip(&headers)
        var body = response.body
        let code = response.status.code
        if code == 204 || code == 304 || (100..<200).contains(code) {
            body = ByteBuffer()
        } else {
            headers[.contentLength] = String(body.readableBytes)
            if method == .head { body = ByteBuffer() }
        }
        if headers[.date] == nil { headers[.date] = dates.now() }
        return (HTTPResponse(status: response.status, headerFields: headers), body)
    }
}

extension ClientAddress {
    /// The address of a socket peer; nil for Unix sockets.
    init?(_ address: SocketAddress?) {
        switch address {
        case .v4(let v4)?:
            let bytes = withUnsafeBytes(of: v4.address.sin_addr) { Array($0) }
            self.init(bytes: bytes)
        case .v6(let v6)?:
            let bytes = withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) }
            self.init(bytes: bytes)
        default:
            return nil
        }
    }
}

/// `Date` header text (RFC 9110 IMF-fixdate), formatted at most once a second.
final class HTTPDateCache: Sendable {
    private let cache = Mutex<(second: Int, text: String)>((-1, ""))

    func now() -> String {
        let second = Int(Date().timeIntervalSince1970)
        return cache.withLock { cache in
            if cache.second != second { cache = (second, HTTPDate.format(second)) }
            return cache.text
        }
    }
}
