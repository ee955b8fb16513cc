import Foundation
import Synchronization
import Testing
import VeneerConfig
import VeneerCore
@testable import VeneerDecorators
import VeneerOrigins
import VeneerTestSupport

/// A token store whose saves start failing after `workingSaves` of them: what a shared
/// database going away between two refreshes looks like to the token manager.
final class FlakyTokenStore: RefreshTokenStore {
    private let state: Mutex<(record: RefreshTokenRecord?, saves: Int)> = Mutex((nil, 0))
    let workingSaves: Int

    init(workingSaves: Int) { self.workingSaves = workingSaves }

    var saved: RefreshTokenRecord? { state.withLock { $0.record } }

    func load() async throws -> RefreshTokenRecord? { state.withLock { $0.record } }

    func save(_ record: RefreshTokenRecord) async throws {
        try state.withLock { state in
            state.saves += 1
            guard state.saves <= workingSaves else { throw StoreError(store: "flaky", reason: "the database went away") }
            state.record = record
        }
    }

    func withLock<T: Sendable>(_ name: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await body()
    }
}

@Suite("auth_refresh token manager")
struct TokenManagerTests {
    @Test("a rotated refresh token that could not be saved is still the one presented next, never the older saved one")
    func noDowngradeAfterFailedSave() async throws {
        let tokens = try await TestTokenServer.start()
        let transports = StandardTransportProvider()
        do {
            var registry = Registry()
            registry.register(AuthRefreshDecorator.factory)
            registry.register(OriginFactory(name: "none", summary: "", options: [], decode: { _ in true }, make: { _, _ in RecordingHandler() }))
            let yaml = "environments: {development: {origin: {none: {}}, chain: [{auth_refresh: {token_url: '\(tokens.url)', client_id: veneer, client_secret: s3cret, refresh_token: rt-0}}]}}"
            let spec = try ConfigDocument(source: ConfigSource(file: "t.yaml", text: yaml)).environment("development", registry: registry, variables: [:], workingDirectory: "/tmp")
            let options = try #require(spec.chain.first?.options as? AuthRefreshOptions)
            let endpoint = TokenEndpoint(options: options, transport: transports.transport(TransportOptions()), clientSecret: "s3cret")
            let store = FlakyTokenStore(workingSaves: 1)
            let manager = TokenManager(options: options, endpoint: endpoint, store: store, clock: SystemClock(), health: HealthBoard(), logger: quietLogger())

            _ = try await manager.refresh(because: "first")     // rt-0 -> rt-1, saved
            let savedAfterFirst = try #require(store.saved).refreshToken
            _ = try await manager.refresh(because: "second")    // rt-1 -> rt-2, the save fails
            #expect(store.saved?.refreshToken == savedAfterFirst, "the store still holds the older record")
            _ = try await manager.refresh(because: "third")     // must present rt-2, not rt-1 again
            #expect(tokens.reuses == 0, "a used refresh token was presented again")
            #expect(tokens.refreshes == 3)
        } catch {
            Issue.record(error)
        }
        await transports.shutdown()
        await tokens.stop()
    }
}
