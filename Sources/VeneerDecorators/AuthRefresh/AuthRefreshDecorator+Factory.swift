import Foundation
import Logging
import VeneerConfig
import VeneerCore

extension AuthRefreshDecorator {
    /// The `auth_refresh` entry of the registry.
    public static let factory = DecoratorFactory(
        name: "auth_refresh",
        summary: "holds the credentials: injects a Bearer token, refreshes it before expiry and after a 401 (one refresh at a time)",
        options: AuthRefreshOptions.docs,
        metrics: AuthRefreshMetrics.descriptions,
        decode: AuthRefreshOptions.decode,
        make: { (options: AuthRefreshOptions, inner: any Handler, context: BuildContext) in
            let clientSecret: String?
            let initialToken: String
            do {
                clientSecret = try options.clientSecret?.reveal()
                initialToken = try options.refreshToken.reveal()
            } catch {
                throw ConfigError([ConfigDiagnostic(mark: nil, path: "", message: ErrorText.describe(error))])
            }
            // One manager per token endpoint, client id and store, whatever the other options:
            // a reload keeps it, its token and a refresh it has under way. The store object,
            // not only its name: a store redefined under the same name gets a manager over
            // the new store (the old one is closed once its chain has drained).
            let store: any RefreshTokenStore
            let key: CarriedKey
            if let name = options.store {
                let named = try await context.stores.store(named: name)
                store = KeyValueRefreshTokenStore(store: named, key: options.stateName)
                key = .shared("auth_refresh.token", options.tokenEndpoint, options.clientID, name, ObjectIdentifier(named as AnyObject))
            } else {
                let path = context.stateDirectory + "/auth_refresh/\(options.stateName).json"
                store = FileRefreshTokenStore(path: path)
                key = .shared("auth_refresh.token", options.tokenEndpoint, options.clientID, "file", path)
            }
            let endpoint = TokenEndpoint(options: options, transport: context.transports.transport(TransportOptions()),
                                         clientSecret: clientSecret)
            var made = false
            let manager = context.carried.value(for: key) {
                made = true
                return TokenManager(options: options, initialToken: initialToken, endpoint: endpoint, store: store, clock: context.clock,
                                    health: context.health, logger: context.logger, metrics: context.metrics, environment: context.environment,
                                    spans: context.spans)
            }
            if made {
                if case .unwritable(let reason, permanent: true) = await manager.prepare() {
                    // Refreshing could never save a rotated token: better not to start than to
                    // start and burn the token family at the next restart.
                    throw ConfigError([ConfigDiagnostic(mark: nil, path: "store", message: "the token store cannot be written: \(reason)")])
                }
            }
            // One token family per store and client, whatever the path of switches and reloads
            // that led here (TokenFamily): at start, on a reload or a switch.
            if let refusal = await manager.refusal(configuring: initialToken, environment: context.environment) {
                throw ConfigError([ConfigDiagnostic(mark: nil, path: "refresh_token", message: refusal)])
            }
            if !made {
                // The running chain shares the manager: a reload whose build fails later
                // (another entry's error) must leave its options as they are.
                let environment = context.environment
                context.carried.whenCommitted { await manager.reconfigure(options, endpoint: endpoint, environment: environment) }
            }
            return AuthRefreshDecorator(inner: inner, manager: manager, callerAuthorization: options.callerAuthorization)
        },
        warn: { (options: AuthRefreshOptions, environment: EnvironmentSpec, _) in options.storeWarnings(environment: environment) }
    )

    /// A decorator with its own token manager, for code that builds chains by hand.
    public static func make(inner: any Handler, options: AuthRefreshOptions, transport: any HTTPTransport, stateDirectory: String,
                            clock: any VeneerClock = SystemClock(), health: HealthBoard = HealthBoard()) async throws -> AuthRefreshDecorator {
        let endpoint = TokenEndpoint(options: options, transport: transport, clientSecret: try options.clientSecret?.reveal())
        let manager = TokenManager(options: options, initialToken: try options.refreshToken.reveal(), endpoint: endpoint,
                                   store: FileRefreshTokenStore(path: stateDirectory + "/auth_refresh/\(options.stateName).json"),
                                   clock: clock, health: health, logger: .init(label: "veneer.auth_refresh"))
        if case .unwritable(let reason, permanent: true) = await manager.prepare() {
            throw StoreError(store: stateDirectory + "/auth_refresh", reason: reason)
        }
        return AuthRefreshDecorator(inner: inner, manager: manager, callerAuthorization: options.callerAuthorization)
    }

    /// How many refreshes this decorator's manager has sent.
    public var refreshCount: Int { get async { await manager.refreshCount } }

    /// Runs the proactive refresh loop (the daemon runs it for decorators it builds).
    public func runBackground() async { await manager.run() }
}
