import Foundation
import HTTPTypes
import VeneerCore

/// `auth_refresh`: callers send no credentials; Veneer holds them. It injects
/// `Authorization: Bearer <access token>`, keeps the token fresh, and after a 401 refreshes
/// (once for all concurrent 401s) and retries that request exactly once; a request whose
/// body streamed (``ProxyRequest/stream``) cannot be sent again, and its 401 is passed on.
///
/// In the request's record it notes the token's time left (when the record traces), and
/// always a refresh it waited for, a retry after 401, or a token it could not get.
public struct AuthRefreshDecorator: Handler {
    let inner: any Handler
    let manager: TokenManager
    let callerAuthorization: AuthRefreshOptions.CallerAuthorization

    public func handle(_ request: ProxyRequest) async throws -> ProxyResponse {
        let record = request.record
        let place = record.traces ? record.place("auth_refresh") : nil
        if callerAuthorization == .pass, request.headers[.authorization] != nil {
            // The caller speaks for itself: its header goes on untouched.
            if place != nil { record.append(.init(name: "auth_refresh", detail: "caller's own Authorization"), at: place) }
            return try await inner.handle(request)
        }
        var request = request
        let handout: TokenHandout
        do {
            handout = try await manager.handout(record: record)
        } catch {
            record.append(.init(name: "auth_refresh", detail: "no token"), at: place)
            throw error
        }
        // Said as the token is handed out: its time left is then, not after the answer.
        let detail = place != nil || handout.refreshed ? describe(handout) : nil
        request.headers[.authorization] = "Bearer " + handout.token.value
        let response: ProxyResponse
        do {
            response = try await inner.handle(request)
        } catch {
            // The upstream failed: what this decorator did still stands.
            if let detail { record.append(.init(name: "auth_refresh", detail: detail), at: place) }
            throw error
        }
        guard response.status == .unauthorized else {
            if let detail { record.append(.init(name: "auth_refresh", detail: detail), at: place) }
            return response
        }
        // A request whose body streamed to the upstream cannot be sent again: its 401 is the
        // caller's, as it came (the token is refreshed by the loop, or by the next 401).
        if request.isStreamed {
            let said = detail ?? describe(handout)
            record.append(.init(name: "auth_refresh", detail: said + ", 401 passed on (streamed body)"), at: place)
            return response
        }
        // The 401 is replaced (by the retry's answer, or the error): a body of it still
        // streaming is dropped, and its upstream connection closed rather than reused.
        response.discardBody()
        let said = detail ?? describe(handout)
        let retryToken: AccessToken
        do {
            retryToken = try await manager.tokenAfterUnauthorized(seen: handout.token, record: record)
        } catch {
            record.append(.init(name: "auth_refresh", detail: said + ", 401, no token"), at: place)
            throw error
        }
        record.append(.init(name: "auth_refresh", detail: said + ", retried after 401"), at: place)
        request.headers[.authorization] = "Bearer " + retryToken.value
        // The second answer, 401 or not, is the caller's.
        return try await inner.handle(request)
    }

    /// `refreshed`, or the token's time left: `token 41s left`.
    func describe(_ handout: TokenHandout) -> String {
        if handout.refreshed { return "refreshed" }
        guard let expiresAt = handout.token.expiresAt else { return "token, expiry unknown" }
        return "token \(Int.clamping(expiresAt.timeIntervalSince(manager.clock.now()), to: 0...Int.max))s left"
    }
}
