import HTTPTypes
import VeneerCore

/// `auth_refresh`: callers send no credentials; Veneer holds them. It injects
/// `Authorization: Bearer <access token>`, keeps the token fresh, and after a 401 refreshes
/// (once for all concurrent 401s) and retries that request exactly once.
public struct AuthRefreshDecorator: Handler {
    let inner: any Handler
    let manager: TokenManager
    let callerAuthorization: AuthRefreshOptions.CallerAuthorization

    public func handle(_ request: ProxyRequest) async throws -> ProxyResponse {
        if callerAuthorization == .pass, request.headers[.authorization] != nil {
            // The caller speaks for itself: its header goes on untouched.
            return try await inner.handle(request)
        }
        var request = request
        let token = try await manager.token()
        request.headers[.authorization] = "Bearer " + token.value
        let response = try await inner.handle(request)
        guard response.status == .unauthorized else { return response }
        let retryToken = try await manager.tokenAfterUnauthorized(seen: token)
        request.headers[.authorization] = "Bearer " + retryToken.value
        // The second answer, 401 or not, is the caller's.
        return try await inner.handle(request)
    }
}
