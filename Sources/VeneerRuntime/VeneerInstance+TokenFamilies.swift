import VeneerConfig
import VeneerCore
import VeneerDecorators

extension VeneerInstance {
    /// Why a switch from `serving` to `target` would mix two token families, if it would.
    ///
    /// auth_refresh keeps one token state per token endpoint, client id and store (a reload
    /// keeps it, and a new refresh token configured in its place replaces the one held: an
    /// operator's act). Two environments that configure *different* refresh tokens for the same
    /// endpoint, client and store are two grants sharing that state: after a switch the target
    /// would be sent the serving environment's access token, and switching back would present
    /// a refresh token the server has already rotated, which revokes the whole family. Such a
    /// switch is refused; each environment needs a store of its own (`store:`, or another
    /// `state_dir`).
    static func tokenFamilyConflicts(serving: EnvironmentSpec, target: EnvironmentSpec) -> [ConfigDiagnostic] {
        struct Family: Hashable {
            let endpoint: String
            let clientID: String
            let store: String
        }
        func families(_ spec: EnvironmentSpec) -> [(family: Family, token: Secret, decorator: DecoratorSpec)] {
            spec.chain.compactMap { decorator in
                guard let options = decorator.options as? AuthRefreshOptions else { return nil }
                let store = options.store.map { "store " + $0 } ?? "file under " + spec.stateDirectory
                return (Family(endpoint: options.tokenEndpoint.description, clientID: options.clientID, store: store), options.refreshToken, decorator)
            }
        }
        let held = families(serving)
        return families(target).compactMap { wanted in
            guard let clash = held.first(where: { $0.family == wanted.family && $0.token != wanted.token }) else { return nil }
            return ConfigDiagnostic(
                mark: wanted.decorator.mark, path: "environments.\(target.name).chain[\(wanted.decorator.site.index)].auth_refresh",
                message: "shares its token state (\(clash.family.endpoint), client \(clash.family.clientID), \(clash.family.store)) with "
                    + "environment \(serving.name), which configures another refresh token: switching would mix the two token families "
                    + "(and present a rotated refresh token). Give one of them a store of its own (store: NAME), or run it as its own instance.")
        }
    }
}
