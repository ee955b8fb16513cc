import Foundation
import NIOCore
import NIOPosix
import Synchronization
import Testing
import VeneerConfig
import VeneerCore
@testable import VeneerDecorators
import VeneerOrigins
import VeneerTestSupport

/// A token store whose saves of granted states (not the in-flight marks) fail while
/// `failing` is set: what a disk or a database going away between two refreshes looks like
/// to the token manager.
final class FlakyTokenStore: RefreshTokenStore {
    private let state: Mutex<(record: RefreshTokenRecord?, failing: Bool)> = Mutex((nil, false))

    var saved: RefreshTokenRecord? { state.withLock { $0.record } }
    func fail(_ failing: Bool) { state.withLock { $0.failing = failing } }

    func load() async throws -> RefreshTokenRecord? { state.withLock { $0.record } }

    func save(_ record: RefreshTokenRecord) async throws {
        try state.withLock { state in
            guard !state.failing || record.inFlightSince != nil else { throw StoreError(store: "flaky", reason: "the database went away") }
            state.record = record
        }
    }

    func withLock<T: Sendable>(_ name: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await body()
    }

    func probe() async -> TokenStoreProbe {
        state.withLock { $0.failing } ? .unwritable(reason: "the database went away", permanent: false) : .writable
    }

    func removeLeftovers() -> Int { 0 }
    func changes() -> AsyncStream<StoreChange>? { nil }
}

@Suite("auth_refresh token manager")
struct TokenManagerTests {
    /// A manager for `tokens` (refresh token rt-0), decoded from a configuration as Veneer does; no refresh loop runs.
    static func manager(tokens: TestTokenServer, transports: StandardTransportProvider, store: any RefreshTokenStore,
                        clock: ManualClock) throws -> TokenManager {
        var registry = Registry()
        registry.register(AuthRefreshDecorator.factory)
        registry.register(OriginFactory(name: "none", summary: "", options: [], decode: { _ in true }, make: { _, _ in RecordingHandler() }))
        let yaml = "environments: {development: {origin: {none: {}}, chain: [{auth_refresh: {token_url: '\(tokens.url)', client_id: veneer, client_secret: s3cret, refresh_token: rt-0}}]}}"
        let spec = try ConfigDocument(source: ConfigSource(file: "t.yaml", text: yaml)).environment("development", registry: registry, variables: [:], workingDirectory: "/tmp")
        let options = try #require(spec.chain.first?.options as? AuthRefreshOptions)
        let endpoint = TokenEndpoint(options: options, transport: transports.transport(TransportOptions()), clientSecret: "s3cret")
        return TokenManager(options: options, initialToken: "rt-0", endpoint: endpoint, store: store, clock: clock,
                            health: HealthBoard(), logger: quietLogger())
    }

    @Test("a rotated refresh token that could not be saved is held: nothing is sent until it is saved, then it (never the older one) is presented")
    func noDowngradeAfterFailedSave() async throws {
        let tokens = try await TestTokenServer.start()
        let transports = StandardTransportProvider()
        do {
            let store = FlakyTokenStore()
            let clock = ManualClock(start: Date())
            let manager = try Self.manager(tokens: tokens, transports: transports, store: store, clock: clock)

            let first = try await manager.token()                                  // rt-0 -> rt-1, saved
            #expect(store.saved?.refreshToken == "rt-1")
            store.fail(true)
            let second = try await manager.tokenAfterUnauthorized(seen: first)    // rt-1 -> rt-2, the save fails
            #expect(second.generation == 2, "the new access token is used although its state is unsaved")
            #expect(store.saved?.refreshToken == "rt-1", "the store still holds the older record")
            await #expect(throws: ProxyError.self) { try await manager.tokenAfterUnauthorized(seen: second) }
            #expect(tokens.forms.count == 2, "no refresh while the newest refresh token is unsaved")

            store.fail(false)
            let loop = Task { await manager.run() }
            defer { loop.cancel() }
            try await eventually("the manager saved the held state and is idle") { await manager.state == .idle }
            #expect(store.saved?.refreshToken == "rt-2", "the held state was saved once the store took it")
            _ = try await manager.tokenAfterUnauthorized(seen: second)            // must present rt-2, not rt-1 again
            #expect(tokens.forms.last?["refresh_token"] == "rt-2")
            #expect(tokens.reuses == 0, "a used refresh token was presented again")
            #expect(tokens.refreshes == 3)
        } catch {
            Issue.record(error)
        }
        await transports.shutdown()
        await tokens.stop()
    }

    @Test("a 401 to a request whose body streamed is passed on as it came: no refresh, no retry (the body cannot be sent again)")
    func streamedBodyNotRetried() async throws {
        let tokens = try await TestTokenServer.start()
        let transports = StandardTransportProvider()
        do {
            let manager = try Self.manager(tokens: tokens, transports: transports, store: FlakyTokenStore(), clock: ManualClock(start: Date()))
            let upstream = RecordingHandler { _ in .json(.unauthorized, ByteBuffer(string: #"{"error":"invalid_token"}"#)) }
            let decorator = AuthRefreshDecorator(inner: upstream, manager: manager, callerAuthorization: .replace)
            var request = ProxyRequest(method: .put, route: .item(.posts, "1"))
            request.stream = BodyStream.of([ByteBuffer(string: "{}")], on: MultiThreadedEventLoopGroup.singleton.next())
            let response = try await decorator.handle(request)
            #expect(response.status == .unauthorized)
            #expect(upstream.count == 1, "not retried")
            #expect(tokens.refreshes == 1, "only the first token's refresh")
            // A whole body is retried once after a refresh, as before.
            _ = try await decorator.handle(ProxyRequest(method: .put, route: .item(.posts, "1"), body: ByteBuffer(string: "{}")))
            #expect(upstream.count == 3)
        } catch {
            Issue.record(error)
        }
        await transports.shutdown()
        await tokens.stop()
    }

    @Test("a token handed out says whether its request waited for a refresh (what auth_refresh notes for the trace)")
    func handoutSaysRefreshed() async throws {
        let tokens = try await TestTokenServer.start()
        let transports = StandardTransportProvider()
        do {
            let manager = try Self.manager(tokens: tokens, transports: transports, store: FlakyTokenStore(), clock: ManualClock(start: Date()))
            let first = try await manager.handout()
            let second = try await manager.handout()
            #expect(first.refreshed && !second.refreshed && first.token == second.token)
        } catch {
            Issue.record(error)
        }
        await transports.shutdown()
        await tokens.stop()
    }

    @Test("auth_refresh notes what it did in a tracing record, also when the upstream then fails; an untraced record gets only a refresh")
    func decoratorNotes() async throws {
        let tokens = try await TestTokenServer.start()
        let transports = StandardTransportProvider()
        do {
            let manager = try Self.manager(tokens: tokens, transports: transports, store: FlakyTokenStore(), clock: ManualClock(start: Date()))
            let failing = RecordingHandler { request in
                if request.route.path == "/posts/2" { throw ProxyError.upstreamUnavailable("The upstream cannot be reached.") }
                return ProxyResponse(status: .ok)
            }
            let decorator = AuthRefreshDecorator(inner: failing, manager: manager, callerAuthorization: .replace)
            let untraced = ProxyRequest(method: .get, route: .item(.posts, "1"))
            _ = try await decorator.handle(untraced)
            #expect(untraced.record.entries == [.init(name: "auth_refresh", detail: "refreshed")], "a refresh is always worth a note")
            let quiet = ProxyRequest(method: .get, route: .item(.posts, "1"))
            _ = try await decorator.handle(quiet)
            #expect(quiet.record.entries.isEmpty, "the routine token only when someone reads it")
            let traced = ProxyRequest(method: .get, route: .item(.posts, "2"), record: RequestRecord(tracing: .serverTiming))
            await #expect(throws: ProxyError.self) { _ = try await decorator.handle(traced) }
            #expect(traced.record.entries == [.init(name: "auth_refresh", detail: "token 60s left")])
        } catch {
            Issue.record(error)
        }
        await transports.shutdown()
        await tokens.stop()
    }
}
