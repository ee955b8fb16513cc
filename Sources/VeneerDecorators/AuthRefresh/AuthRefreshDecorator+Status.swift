import Foundation
import VeneerCore

extension AuthRefreshDecorator: StatusReporting {
    /// The manager's refreshes, the access token's expiry and where refreshing stands.
    public func statusFigures() async -> [StatusFigure] {
        await manager.statusFigures()
    }
}

extension TokenManager {
    /// Refresh requests sent, when the access token held expires (and in how many seconds),
    /// and the state: `ok`, `refreshing`, `backing_off`, `waiting_for_store` or `stopped`.
    /// Never a token.
    func statusFigures() -> [StatusFigure] {
        let now = clock.now()
        let state: String = switch machine.state {
        case .idle: "ok"
        case .refreshing: "refreshing"
        case .backingOff: "backing_off"
        case .waitingForStore: "waiting_for_store"
        case .stopped: "stopped"
        }
        var figures = [StatusFigure("refreshes", refreshCount), StatusFigure("state", .string(state))]
        if let expiresAt = machine.access?.expiresAt {
            figures.append(StatusFigure("token_expires_at", .string(Timestamp.iso8601(expiresAt))))
            figures.append(StatusFigure("token_expires_in_seconds", Int.clamping(expiresAt.timeIntervalSince(now), to: 0...Int.max)))
        } else {
            figures.append(StatusFigure("token_expires_at", machine.access == nil ? .null : .string("not given")))
        }
        return figures
    }
}
