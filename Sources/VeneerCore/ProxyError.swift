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
        case misdirectedRequest = "misdirected_request"
        case crossSiteRefused = "cross_site_refused"
        case accountBlocked = "account_blocked"
        case clientBlocked = "client_blocked"
        case unauthorized = "unauthorized"
        case upstreamUnavailable = "upstream_unavailable"
        case upstreamTimeout = "upstream_timeout"
        /// 503: buffering the body would go over `limits.buffered`.
        case overloaded = "overloaded"
        case `internal` = "internal"

        /// The HTTP status each code is answered with.
        public var status: HTTPResponse.Status {
            switch self {
            case .badRequest: return .badRequest
            case .notFound: return .notFound
            case .methodNotAllowed: return .methodNotAllowed
            case .payloadTooLarge: return .contentTooLarge
            case .requestTimeout: return .requestTimeout
            case .misdirectedRequest: return .misdirectedRequest
            case .crossSiteRefused: return .forbidden
            case .accountBlocked, .clientBlocked: return .forbidden
            case .unauthorized: return .unauthorized
            case .upstreamUnavailable: return .badGateway
            case .upstreamTimeout: return .gatewayTimeout
            case .overloaded: return .serviceUnavailable
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
    /// What only the daemon log may say (the upstream's address, a parser's words): the edge
    /// logs it with the request id; it never goes to the caller.
    public var detail: String?

    /// Creates an error.
    public init(_ code: Code, _ message: String, headers: HTTPFields = [:], detail: String? = nil) {
        self.code = code
        self.message = message
        self.headers = headers
        self.detail = detail
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
    /// A 502 `upstream_unavailable`; `detail` for the log only.
    public static func upstreamUnavailable(_ message: String, detail: String? = nil) -> ProxyError {
        ProxyError(.upstreamUnavailable, message, detail: detail)
    }
    /// A 504 `upstream_timeout`; `detail` for the log only.
    public static func upstreamTimeout(_ message: String, detail: String? = nil) -> ProxyError {
        ProxyError(.upstreamTimeout, message, detail: detail)
    }
    /// The 502 `upstream_unavailable` of an upstream that closed the connection before a
    /// byte of its answer: one form, shared by the upstream origin and `fault`'s `drop`, so
    /// that a rehearsed failure is the real one. `target` names the upstream, for the log only.
    public static func upstreamClosedWithoutAnswer(_ target: String?) -> ProxyError {
        .upstreamUnavailable("The upstream closed the connection without answering.",
                             detail: target.map { "\($0) closed the connection without answering" })
    }
    /// A 500 `internal`, with a message that leaks nothing.
    public static let `internal` = ProxyError(.internal, "Veneer failed to handle the request.")
}
