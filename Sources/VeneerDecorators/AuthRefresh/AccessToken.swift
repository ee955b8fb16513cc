import Foundation

/// An access token as the manager hands it out.
struct AccessToken: Sendable, Equatable {
    let value: String
    /// When it expires; nil when the endpoint did not say (then only a 401 refreshes it).
    let expiresAt: Date?
    /// Increases with every refresh: a request that got its 401 with an older token than
    /// the current one retries with the current one instead of refreshing again.
    let generation: Int
}

/// A token as one request got it: whether it waited for a refresh says what `auth_refresh`
/// notes in the request's record.
struct TokenHandout: Sendable {
    let token: AccessToken
    let refreshed: Bool
}
