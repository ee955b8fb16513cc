import AsyncHTTPClient
import HTTPTypes
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1
import NIOPosix
import NIOSSL
import Synchronization
import VeneerCore
import VeneerHTTP1

/// ``HTTPTransport`` over AsyncHTTPClient: one client (one connection pool) per distinct
/// set of ``TransportOptions``, on the daemon's event loops.
public final class AsyncHTTPClientTransport: HTTPTransport {
    let client: HTTPClient

    /// Creates a transport with its own client.
    public init(options: TransportOptions, eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) {
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        configuration.decompression = .disabled
        configuration.timeout = .init(connect: .init(options.connectTimeout), read: nil)
        configuration.connectionPool = .init(
            idleTimeout: .seconds(60),
            concurrentHTTP1ConnectionsPerHostSoftLimit: options.connectionsPerLoop ?? 128)
        configuration.httpVersion = .automatic
        client = HTTPClient(eventLoopGroup: eventLoopGroup, configuration: configuration)
    }

    /// Sends one request and buffers the response.
    public func send(_ request: OutboundRequest) async throws -> ProxyResponse {
        var outbound = HTTPClientRequest(url: request.endpoint.scheme + "://" + request.endpoint.authority + request.target)
        outbound.method = HTTPMethod(request.method)
        var headers = HTTPHeaders()
        headers.reserveCapacity(request.headers.count + 1)
        headers.add(name: "Host", value: request.endpoint.authority)
        for field in request.headers {
            headers.add(name: field.name.rawName, value: field.value)
        }
        outbound.headers = headers
        if let body = request.body {
            outbound.body = .bytes(body)
        } else if let stream = request.bodyStream {
            // Only the pooled http:// transport streams request bodies: this one reads it whole
            // first, within the largest body it accepts back (a cut body's error as it is).
            outbound.body = .bytes(try await stream.collect(upTo: request.maxResponseBodySize))
        }
        let response: HTTPClientResponse
        do {
            response = try await client.execute(outbound, timeout: .init(request.timeout))
        } catch {
            throw Self.map(error, request)
        }
        let body: ByteBuffer
        do {
            body = try await response.body.collect(upTo: request.maxResponseBodySize)
        } catch is NIOTooManyBytesError {
            throw ProxyError.upstreamUnavailable("The upstream's response is larger than allowed.",
                                                 detail: "\(request.endpoint.authority): the response is larger than \(request.maxResponseBodySize) bytes")
        } catch {
            throw Self.map(error, request)
        }
        var fields = HTTPFields(response.headers, splitCookie: false)
        HopByHop.strip(&fields)
        let status = HTTPResponse.Status(code: Int(response.status.code), reasonPhrase: response.status.reasonPhrase)
        return ProxyResponse(status: status, headers: ProxyHeaders(fields), body: body)
    }

    static func map(_ error: any Error, _ request: OutboundRequest) -> ProxyError {
        let mapped = describe(error, request)
        return neverSent(error) ? mapped.neverSent : mapped
    }

    /// Whether `error` proves that no byte of the request was written: only errors that arise
    /// while a connection is being made (connect, TLS handshake and its certificate checks,
    /// proxy handshakes) or while the request waits in the pool for one. Anything else (a
    /// close, a reset, an unclean TLS shutdown) may have come after the request went out.
    static func neverSent(_ error: any Error) -> Bool {
        switch error {
        case let error as HTTPClientError:
            return [.connectTimeout, .getConnectionFromPoolTimeout, .tlsHandshakeTimeout, .socksHandshakeTimeout,
                    .httpProxyHandshakeTimeout].contains(error)
        case is NIOConnectionError, is NIOSSLExtraError:
            return true
        case let error as IOError:
            // Only a connect is refused; an established connection is reset instead.
            return error.errnoCode == ECONNREFUSED
        case let error as NIOSSLError:
            if case .handshakeFailed = error { return true }
            return false
        case let error as ChannelError:
            if case .connectTimeout = error { return true }
            return false
        default:
            return false
        }
    }

    static func describe(_ error: any Error, _ request: OutboundRequest) -> ProxyError {
        let target = request.endpoint.authority
        if let error = error as? HTTPClientError {
            switch error {
            case .deadlineExceeded, .readTimeout, .writeTimeout:
                return .upstreamTimeout("The upstream did not answer in time.", detail: "\(target) did not answer within \(request.timeout)")
            case .connectTimeout:
                return .upstreamTimeout("Connecting to the upstream timed out.", detail: "connecting to \(target) timed out")
            default:
                return .upstreamUnavailable("The upstream failed.", detail: "\(target) failed: \(error.shortDescription)")
            }
        }
        if error is CancellationError {
            return .upstreamUnavailable("The request to the upstream was cancelled.", detail: "the request to \(target) was cancelled")
        }
        return .upstreamUnavailable("The upstream is unreachable.", detail: "\(target) is unreachable: \(error)")
    }

    /// Closes every connection.
    public func shutdown() async throws {
        try await client.shutdown()
    }
}
