import VeneerConfig
import VeneerCore

/// Options of `auth_refresh`, decoded once. Secrets stay ``Secret`` values until the
/// decorator is built; nothing here prints them.
public struct AuthRefreshOptions: Sendable, Hashable {
    /// How the client authenticates to the token endpoint (RFC 6749 §2.3.1).
    public enum ClientAuthentication: String, Sendable, Hashable {
        /// HTTP Basic with the form-encoded id and secret.
        case basic
        /// `client_id` and `client_secret` in the form body.
        case body
    }

    /// What happens to a caller's own `Authorization` header.
    public enum CallerAuthorization: String, Sendable, Hashable {
        /// Veneer's token replaces it.
        case replace
        /// It is passed on untouched (and Veneer adds nothing, refreshes nothing, for that request).
        case pass
    }

    /// The token endpoint.
    public var tokenEndpoint: Endpoint
    /// The client id.
    public var clientID: String
    /// The client secret, if the client has one.
    public var clientSecret: Secret?
    /// The refresh token to start from.
    public var refreshToken: Secret
    /// The scope to ask for, if any.
    public var scope: String?
    /// Client authentication.
    public var clientAuthentication: ClientAuthentication = .basic
    /// Refresh this long before the access token expires.
    public var refreshBeforeExpiry: Duration = .seconds(30)
    /// What to do with a caller's Authorization header.
    public var callerAuthorization: CallerAuthorization = .replace
    /// A named store for the rotated refresh token; nil: a file under `state_dir`.
    public var store: String?
    /// How long a caller waits for a token request (then 504; the request itself goes on).
    public var timeout: Duration = .seconds(10)
    /// How long a refresh request already sent is awaited: its answer may carry the only valid
    /// refresh token, so it is never abandoned before this.
    public var refreshWait: Duration = .seconds(300)

    static let docs: [OptionDoc] = [
        OptionDoc("token_url", "URL", "the OAuth 2.0 token endpoint (required)"),
        OptionDoc("client_id", "text", "the client id (required)"),
        OptionDoc("client_secret", "secret", "the client secret (or client_secret_file, e.g. ${CREDENTIALS_DIRECTORY}/client-secret)", secret: true),
        OptionDoc("refresh_token", "secret", "the initial refresh token (or refresh_token_file); required", secret: true),
        OptionDoc("scope", "text", "scope to request on refresh"),
        OptionDoc("client_auth", "basic or body", default: "basic", "how the client authenticates to the token endpoint"),
        OptionDoc("refresh_before_expiry", "duration", default: "30s", "refresh this long before the access token expires"),
        OptionDoc("caller_authorization", "replace or pass", default: "replace", "replace a caller's own Authorization, or pass it untouched"),
        OptionDoc("store", "store name", default: "a file under state_dir", "where the rotated refresh token is kept"),
        OptionDoc("timeout", "duration", default: "10s", "how long a caller waits for the token endpoint (then 504; the refresh goes on)"),
        OptionDoc("refresh_wait", "duration", default: "5m",
                  "how long a refresh request already sent is awaited; without an answer by then, refreshing stops (outcome unknown)"),
    ]

    static func decode(_ mapping: ConfigMapping, site: ChainSite) -> AuthRefreshOptions? {
        let urlValue = mapping.required("token_url")
        let url = mapping.string("token_url")
        let clientID = mapping.string("client_id", required: true)
        let clientSecret = mapping.secret("client_secret")
        let refreshToken = mapping.secret("refresh_token", required: true)
        let scope = mapping.string("scope")
        let clientAuth = mapping.choice("client_auth", ["basic", "body"], default: "basic")
        let before = mapping.duration("refresh_before_expiry", default: .seconds(30), in: .init(.zero ... .days(1))) ?? .seconds(30)
        let caller = mapping.choice("caller_authorization", ["replace", "pass"], default: "replace")
        let store = mapping.storeReference()
        if store == nil && !mapping.contains("store") { mapping.note("store", .string("file under state_dir")) }
        let timeout = mapping.duration("timeout", default: .seconds(10), in: .init(.milliseconds(1) ... .seconds(600))) ?? .seconds(10)
        let refreshWait = mapping.duration("refresh_wait", default: .seconds(300), in: .init(.milliseconds(1) ... .days(1))) ?? .seconds(300)
        if refreshWait < timeout {
            mapping.error("refresh_wait", "must be at least timeout (\(Units.format(timeout))): a refresh is awaited at least as long as its callers")
        }
        guard let url, let clientID, let refreshToken else { return nil }
        guard let endpoint = Endpoint(url: url) else {
            urlValue?.error("\"\(url)\" is not a token endpoint URL (use http(s)://host[:port]/path)")
            return nil
        }
        if clientAuth == "basic" && clientSecret == nil {
            mapping.error("client_secret", "required with client_auth: basic (or set client_auth: body for a public client)")
        }
        var options = AuthRefreshOptions(tokenEndpoint: endpoint, clientID: clientID, clientSecret: clientSecret, refreshToken: refreshToken)
        options.scope = scope
        options.clientAuthentication = ClientAuthentication(rawValue: clientAuth) ?? .basic
        options.refreshBeforeExpiry = before
        options.callerAuthorization = CallerAuthorization(rawValue: caller) ?? .replace
        options.store = store == "memory" ? "memory" : store
        options.timeout = timeout
        options.refreshWait = refreshWait
        return options
    }

    /// Creates options.
    public init(tokenEndpoint: Endpoint, clientID: String, clientSecret: Secret?, refreshToken: Secret) {
        self.tokenEndpoint = tokenEndpoint
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.refreshToken = refreshToken
    }

    /// A stable name for this client's state: the token endpoint and client id.
    var stateName: String {
        let text = "\(tokenEndpoint)|\(clientID)"
        return String(text.utf8.reduce(UInt64(14_695_981_039_346_656_037)) { ($0 ^ UInt64($1)) &* 1_099_511_628_211 }, radix: 16)
    }
}
