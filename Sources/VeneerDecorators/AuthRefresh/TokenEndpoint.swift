import Foundation
import HTTPTypes
import NIOCore
import VeneerConfig
import VeneerCore

/// What came of one refresh request.
enum TokenGrantResult: Sendable, Equatable {
    /// A new access token (and maybe a rotated refresh token).
    case granted(accessToken: String, expiresIn: Int?, refreshToken: String?)
    /// The grant was refused for good (`invalid_grant` and other 400/401/403 answers).
    case rejected(reason: String)
    /// No grant, and the refresh token was not used up: the endpoint answered with a failure
    /// (5xx, nonsense), or the request provably never reached it. The same token may be sent again.
    case failed(ProxyError)
    /// No answer, and the request may have reached the endpoint (no answer within
    /// `refresh_wait`, a connection lost after the request went out): the endpoint may have
    /// rotated the token, so it must not be sent again.
    case unknown(ProxyError)
}

/// The OAuth 2.0 `refresh_token` grant (RFC 6749 §6) over the shared HTTP transport.
struct TokenEndpoint: Sendable {
    /// The longest `expires_in` taken as it is: ten years, in seconds.
    static let longestExpiry = 10 * 365 * 86_400

    let options: AuthRefreshOptions
    let transport: any HTTPTransport
    let clientSecret: String?

    /// One refresh request; with `record` of a request whose environment has `telemetry`,
    /// it carries Veneer's `traceparent` and is a client span of that request's trace.
    func refresh(with refreshToken: String, record: RequestRecord? = nil) async -> TokenGrantResult {
        let span = record?.beginOutgoing()
        let result = await exchange(refreshToken, traceparent: span?.traceparent)
        if let record, let span {
            var attributes: [(key: String, value: SpanNote.Value)] = [
                ("http.request.method", .string("POST")), ("server.address", .string(options.tokenEndpoint.host)),
                ("url.path", .string(options.tokenEndpoint.basePath.isEmpty ? "/" : options.tokenEndpoint.basePath)),
            ]
            var error: String?
            switch result {
            case .granted: attributes.append(("veneer.token_refresh", .string("granted")))
            case .rejected(let reason):
                attributes.append(("veneer.token_refresh", .string("rejected")))
                error = reason
            case .failed(let failure), .unknown(let failure):
                attributes.append(("veneer.token_refresh", .string("failed")))
                error = failure.code.rawValue
            }
            record.endOutgoing(span, name: "POST token_endpoint", attributes: attributes, error: error)
        }
        return result
    }

    private func exchange(_ refreshToken: String, traceparent: String?) async -> TokenGrantResult {
        var form: [(String, String)] = [("grant_type", "refresh_token"), ("refresh_token", refreshToken)]
        if let scope = options.scope { form.append(("scope", scope)) }
        var headers: HTTPFields = [.contentType: "application/x-www-form-urlencoded", .accept: "application/json"]
        if let traceparent { headers[.traceparent] = traceparent }
        switch options.clientAuthentication {
        case .basic:
            // RFC 6749 §2.3.1: the id and secret are form-encoded before Base64.
            let credentials = Self.formEncode(options.clientID) + ":" + Self.formEncode(clientSecret ?? "")
            headers[.authorization] = "Basic " + Data(credentials.utf8).base64EncodedString()
        case .body:
            form.append(("client_id", options.clientID))
            if let clientSecret { form.append(("client_secret", clientSecret)) }
        }
        let body = form.map { Self.formEncode($0.0) + "=" + Self.formEncode($0.1) }.joined(separator: "&")
        let request = OutboundRequest(
            method: .post, endpoint: Endpoint(scheme: options.tokenEndpoint.scheme, host: options.tokenEndpoint.host,
                                              port: options.tokenEndpoint.port, basePath: ""),
            target: options.tokenEndpoint.basePath.isEmpty ? "/" : options.tokenEndpoint.basePath,
            // The request is awaited for refresh_wait, not timeout: its answer may hold the
            // only valid refresh token. Callers stop waiting at timeout (TokenManager).
            headers: headers, body: ByteBuffer(string: body), timeout: options.refreshWait, maxResponseBodySize: 1 << 20)
        let response: ProxyResponse
        do {
            response = try await transport.send(request)
        } catch let error as ProxyError {
            if error.requestNeverSent { return .failed(.upstreamUnavailable("The token endpoint is unreachable.")) }
            return .unknown(error.code == .upstreamTimeout
                ? .upstreamTimeout("The token endpoint did not answer a refresh within \(Units.format(options.refreshWait)).")
                : .upstreamUnavailable("The connection to the token endpoint broke before its answer."))
        } catch {
            return .unknown(.upstreamUnavailable("The connection to the token endpoint broke before its answer."))
        }
        let json = try? JSONValue.parse(response.body)
        switch response.status.code {
        case 200:
            guard let json, let accessToken = json["access_token"]?.stringValue, !accessToken.isEmpty else {
                return .failed(.upstreamUnavailable("The token endpoint answered without an access token."))
            }
            if let type = json["token_type"]?.stringValue, type.lowercased() != "bearer" {
                return .rejected(reason: "the token endpoint issued a '\(type)' token; only Bearer tokens are supported")
            }
            // A number from the endpoint: past ten years it is taken as ten years (no date or
            // timer then overflows); one that is not a whole number of seconds is unknown.
            let expiresIn = (json["expires_in"]?.intValue ?? json["expires_in"]?.stringValue.flatMap { Int($0) }).map { min(max($0, 0), Self.longestExpiry) }
            return .granted(accessToken: accessToken, expiresIn: expiresIn, refreshToken: json["refresh_token"]?.stringValue)
        case 400, 401, 403:
            let code = json?["error"]?.stringValue ?? "HTTP \(response.status.code)"
            // The description comes from the endpoint, not from us: keep it short, never echo tokens.
            return .rejected(reason: "refresh token rejected (\(code.prefix(64)))")
        default:
            return .failed(.upstreamUnavailable("The token endpoint failed with HTTP \(response.status.code)."))
        }
    }

    /// application/x-www-form-urlencoded: unreserved characters as they are, space as '+', the rest %XX.
    static func formEncode(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "*"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            case UInt8(ascii: " "):
                out += "+"
            default:
                out += String(format: "%%%02X", byte)
            }
        }
        return out
    }
}
