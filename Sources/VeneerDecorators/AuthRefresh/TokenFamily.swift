/// The token family a token store holds for one client (token endpoint and client id), as
/// the authorization server sees it: a family is the grant that one configured refresh token
/// started, and every token rotated from it belongs to it. The store keeps one family per
/// client; presenting a token of a family whose newest rotation is lost (overwritten by
/// another family's) revokes it. So the family is kept with the stored token, by the SHA-256
/// of its configured refresh token (never the token), together with the environments that
/// configured it and the families it deliberately replaced.
///
/// ``admit(_:environment:held:)`` is the one rule, applied wherever a configured refresh
/// token meets a held family: building a chain (start, reload, switch), a changed
/// refresh token file, and each refresh under the store's lock.
struct TokenFamily: Equatable, Sendable {
    /// The SHA-256 of the configured refresh token the family started from.
    var origin: String
    /// The environments that configured it, the most recent last; nil for a record saved
    /// before Veneer kept them (any environment may replace such a family, as before).
    var owners: [String]?
    /// Families this one replaced (an operator provided a new refresh token): their
    /// configured tokens are never taken again.
    var retired: [String] = []

    /// At most this many owners and retired families are kept (the oldest are dropped).
    static let memory = 16

    /// What a configured refresh token may do with the family held.
    enum Admission: Equatable {
        /// Nothing is held: the configured token starts its family.
        case fresh
        /// The configured token's own family is held: its newest rotation is used.
        case same
        /// The environment that holds the family configures a new refresh token: an operator's
        /// act. The new family takes over, and the old one (this origin) is retired.
        case replaces(String)
        /// Another environment's family is held, or this token's family was replaced: taking
        /// it would overwrite (or had lost) a family's newest rotation.
        case refused(Refusal)
    }

    /// Why a configured refresh token may not take the store.
    enum Refusal: Equatable {
        /// The store holds the family of these environments (not the one asking).
        case heldByOthers([String])
        /// This token's family was replaced by another: its newest rotation is gone.
        case retired
    }

    /// Whether the configured token whose SHA-256 is `origin`, in `environment`, may use the
    /// store that holds `held`.
    ///
    /// Deliberate and accidental changes are told apart by who asks: the environment that
    /// configured the held family bringing another token is an operator replacing it (a new
    /// file, an edited configuration, then a reload or restart); another environment bringing
    /// another token is two grants sharing one store (a switch, even through environments
    /// without `auth_refresh`, or a second instance), which would overwrite one family's
    /// newest refresh token and later present a rotated one.
    static func admit(_ origin: String, environment: String, held: TokenFamily?) -> Admission {
        guard let held else { return .fresh }
        if held.origin == origin { return .same }
        if held.retired.contains(origin) { return .refused(.retired) }
        guard let owners = held.owners, !owners.contains(environment) else { return .replaces(held.origin) }
        return .refused(.heldByOthers(owners))
    }

    /// `list` with `item` last (moved there when already in it), at most ``memory`` long.
    static func appending(_ item: String, to list: [String]) -> [String] {
        Array((list.filter { $0 != item } + [item]).suffix(memory))
    }

    /// Both lists, `later` last, without repeats, at most ``memory`` long.
    static func merging(_ earlier: [String], _ later: [String]) -> [String] {
        later.reduce(earlier) { appending($1, to: $0) }
    }
}

extension TokenFamily.Refusal {
    /// What an operator reads: what would go wrong, and what to do.
    func explanation(store: String?) -> String {
        let store = "the token store" + (store.map { " (\($0))" } ?? "")
        switch self {
        case .heldByOthers(let owners):
            let names = owners.joined(separator: ", ")
            return "\(store) holds the token family of environment\(owners.count == 1 ? "" : "s") \(names), which configure"
                + "\(owners.count == 1 ? "s" : "") another refresh token for this token endpoint and client: using it here would mix the "
                + "two token families, overwrite that family's newest refresh token and later present a rotated one, which revokes the family. "
                + "Give this environment a store of its own (store: NAME), or run it as its own instance; if \(names) no longer "
                + "need\(owners.count == 1 ? "s" : "") that refresh token, remove its token state from the store first"
        case .retired:
            return "this refresh token's family was replaced in \(store) by a newer refresh token: its newest rotation "
                + "is gone, and presenting it could revoke the family. Configure the newer refresh token, or a new one"
        }
    }
}
