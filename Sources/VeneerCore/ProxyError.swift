import HTTPTypes

/// An error that Veneer itself answers, as `{"error": code, "message": ...}`.
///
/// Decorators and origins throw these; the server edge turns them into responses. Any other
/// error that reaches the edge is answered as ``Code/internal`` without details.
public struct ProxyError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The machine-readable error codes of DESIGN.md.
    public enum Code: String, Sendable, CaseIterable {
        case badRequest = "bad_request"
        case notFound = "not_found"
        case methodNotAllowed = "method_not_allowed"
        case payloadTooLarge = "payload_too_large"
        case requestTimeout = "request_timeout"
        case accountBlocked = "account_blocked"
        case clientBlocked = "client_blocked"
        case unauthorized = "unauthorized"
        case upstreamUnavailable = "upstream_unavailable"
        case upstreamTimeout = "upstream_timeout"
        case `internal` = "internal"

        /// The HTTP status each code is answered with.
        public var status: HTTPResponse.Status {
            switch self {
            case .badRequest: return .badRequest
            case .notFound: return .notFound
            case .methodNotAllowed: return .methodNotAllowed
            case .payloadTooLarge: return .contentTooLarge
            case .requestTimeout: return .requestTimeout
            case .accountBlocked, .clientBlocked: return .forbidden
            case .unauthorized: return .unauthorized
            case .upstreamUnavailable: return .badGateway
            case .upstreamTimeout: return .gatewayTimeout
            case .internal: return .internalServerError
            }
        }
    }

    /// The error code.
    public let code: Code
    /// One human sentence, safe to show to the caller (no secrets, no internals).
    public let message: String
    /// Extra response headers, such as `Allow` for 405 or `Retry-After`.
    public var headers: HTTPFields
    /// For the failure of an outbound request (``HTTPTransport``): true only when the request
    /// provably never reached the peer (connecting or the TLS handshake failed, or it never
    /// left the queue), so that even a request that must not be repeated once received (a
    /// refresh token grant) may be sent again. False when any of it may have been written.
    public var requestNeverSent = false

    /// Creates an error.
    public init(_ code: Code, _ message: String, headers: HTTPFields = [:]) {
        self.code = code
        self.message = message
        self.headers = headers
    }

    /// The status the error is answered with.
    public var status: HTTPResponse.Status { code.status }

    /// The same error, marked as the failure of a request that never reached its peer.
    public var neverSent: ProxyError {
        var copy = self
        copy.requestNeverSent = true
        return copy
    }

    /// `code: message`.
    public var description: String { "\(code.rawValue): \(message)" }

    /// A 400 `bad_request`.
    public static func badRequest(_ message: String) -> ProxyError { ProxyError(.badRequest, message) }
    /// A 404 `not_found`.
    public static func notFound(_ message: String = "No such resource.") -> ProxyError { ProxyError(.notFound, message) }
    /// A 502 `upstream_unavailable`.
    public static func upstreamUnavailable(_ message: String) -> ProxyError { ProxyError(.upstreamUnavailable, message) }
    /// A 504 `upstream_timeout`.
    public static func upstreamTimeout(_ message: String) -> ProxyError { ProxyError(.upstreamTimeout, message) }
    /// A 500 `internal`, with a message that leaks nothing.
    public static let `internal` = ProxyError(.internal, "Veneer failed to handle the request.")
}
