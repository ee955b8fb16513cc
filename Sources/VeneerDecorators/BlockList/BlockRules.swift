#if canImport(Glibc)
import Glibc
#endif
import HTTPTypes
import VeneerCore

/// An IPv4 or IPv6 network: an address and a prefix length (`10.0.0.0/8`, `::1/128`).
public struct CIDR: Hashable, Sendable, CustomStringConvertible {
    let network: [UInt8]
    let prefix: Int

    /// Parses `a.b.c.d[/n]` or `v6[/n]`; a bare address is a single host.
    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = ClientAddress(parts[0]) else { return nil }
        let bits = address.bytes.count * 8
        var prefix = bits
        if parts.count == 2 {
            guard let value = Int(parts[1]), (0...bits).contains(value), parts[1].allSatisfy(\.isNumber) else { return nil }
            prefix = value
        }
        self.prefix = prefix
        // Keep only the network bits, so that 10.1.2.3/8 means 10.0.0.0/8.
        var network = address.bytes
        for index in 0..<network.count {
            let keep = max(0, min(8, prefix - index * 8))
            network[index] &= keep == 0 ? 0 : UInt8(truncatingIfNeeded: 0xFF << (8 - keep))
        }
        self.network = network
    }

    /// Whether `address` is in this network (IPv4-mapped IPv6 counts as IPv4).
    public func contains(_ address: ClientAddress) -> Bool {
        let bytes = address.unmapped.bytes
        guard bytes.count == network.count else { return false }
        var remaining = prefix
        for index in 0..<bytes.count where remaining > 0 {
            let bits = min(8, remaining)
            let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - bits))
            if bytes[index] & mask != network[index] { return false }
            remaining -= bits
        }
        return true
    }

    /// `10.0.0.0/8`.
    public var description: String { "\(ClientAddress(bytes: network)!)/\(prefix)" }
}

/// A route in a rule: a collection, any item of it, or one item.
public enum RoutePattern: Hashable, Sendable, CustomStringConvertible {
    /// `/posts`.
    case list(String)
    /// `/posts/{id}`.
    case anyItem(String)
    /// `/posts/13`.
    case item(String, String)

    /// Parses `/posts`, `/posts/{id}` or `/posts/13`.
    public init?(_ text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0].isEmpty, !parts[1].isEmpty else { return nil }
        let name = String(parts[1])
        switch parts.count {
        case 2: self = .list(name)
        case 3 where parts[2] == "{id}": self = .anyItem(name)
        case 3 where !parts[2].isEmpty: self = .item(name, String(parts[2]))
        default: return nil
        }
    }

    func matches(_ route: ResourceRoute) -> Bool {
        matches(route, integerID: integerID)
    }

    /// The rule's item id read as an integer (nil for another pattern, or an id that is none).
    var integerID: Int? {
        if case .item(_, let id) = self { return Int(id) }
        return nil
    }

    /// ``matches(_:)`` with the rule's ``integerID`` read once beforehand.
    func matches(_ route: ResourceRoute, integerID: Int?) -> Bool {
        switch (self, route.target) {
        case (.list(let name), .list): return name == route.resource.name
        case (.anyItem(let name), .item): return name == route.resource.name
        case (.item(let name, let id), .item(let actual)):
            // A rule's integer id matches by value: `/posts/013` in a rule is item 13 (requests
            // for `/posts/013` itself are refused at the edge).
            guard name == route.resource.name else { return false }
            return route.resource.hasIntegerIDs ? integerID.map { $0 == Int(actual) } ?? false : id == actual
        default: return false
        }
    }

    public var description: String {
        switch self {
        case .list(let name): return "/\(name)"
        case .anyItem(let name): return "/\(name)/{id}"
        case .item(let name, let id): return "/\(name)/\(id)"
        }
    }
}

/// A systemd unit name pattern (`cron*.service`), matched like a shell glob.
public struct UnitPattern: Hashable, Sendable, CustomStringConvertible {
    /// The pattern as written.
    public let description: String

    /// A pattern.
    public init(_ pattern: String) { description = pattern }

    func matches(_ unit: String) -> Bool { fnmatch(description, unit, 0) == 0 }
}

/// One list of rules (`deny` or `allow`): client networks, callers (uids, groups, systemd
/// units, as the kernel names them: ``PeerIdentity``), header values, methods, routes.
public struct RuleSet: Hashable, Sendable {
    /// Client networks.
    public var clients: [CIDR] = []
    /// Header name (lower-case) to the values that match.
    public var headers: [String: Set<String>] = [:]
    /// Methods, upper-case.
    public var methods: Set<String> = []
    /// Routes.
    public var routes: [RoutePattern] = []
    /// Callers' user ids.
    public var uids: Set<UInt32> = []
    /// Callers' groups (primary or supplementary), by id.
    public var groups: Set<UInt32> = []
    /// Callers' systemd units.
    public var units: [UnitPattern] = []

    /// An empty set.
    public init() {}

    /// Whether nothing is listed.
    public var isEmpty: Bool { clients.isEmpty && headers.isEmpty && methods.isEmpty && routes.isEmpty && !namesCallers }

    /// Whether it lists callers (uids, groups or units).
    var namesCallers: Bool { !uids.isEmpty || !groups.isEmpty || !units.isEmpty }

    /// Adds `other`'s rules.
    mutating func merge(_ other: RuleSet) {
        clients += other.clients
        for (name, values) in other.headers { headers[name, default: []].formUnion(values) }
        methods.formUnion(other.methods)
        routes += other.routes
        uids.formUnion(other.uids)
        groups.formUnion(other.groups)
        units += other.units
    }

    /// The first caller rule that `peer` matches: its uid, one of its groups, its unit.
    func callerMatch(_ peer: PeerIdentity?) -> String? {
        guard let peer else { return nil }
        if uids.contains(peer.uid) { return "uid \(peer.uid)" }
        if let group = groups.first(where: { peer.isInGroup($0) }) { return "group \(group)" }
        if let unit = peer.unit, let pattern = units.first(where: { $0.matches(unit) }) { return "unit \(pattern)" }
        return nil
    }

    /// An allow list: the first kind of rule that is listed and that the request does not
    /// match (every listed kind must match; an empty list allows everything).
    func firstMiss(_ request: ProxyRequest) -> String? {
        if !clients.isEmpty {
            guard let client = request.client, clients.contains(where: { $0.contains(client) }) else { return "client not allowed" }
        }
        // The caller lists are one kind: a listed uid, a listed group or a listed unit lets it
        // in. A caller the kernel did not name (TCP without peer_identity) is none of them.
        if namesCallers, callerMatch(request.peer) == nil {
            return request.peer.map { "uid \($0.uid) not allowed" } ?? "caller unknown (not a Unix socket or peer_identity connection)"
        }
        for (name, values) in headers {
            // Every element named must be listed (exactly): one allowed value does not carry others in.
            guard let fieldName = HTTPField.Name(name), case let elements = Self.elements(of: fieldName, in: request), !elements.isEmpty,
                  elements.allSatisfy({ values.contains(String($0)) }) else {
                return "header \(name) not allowed"
            }
        }
        if !methods.isEmpty, !methods.contains(request.method.rawValue) { return "method not allowed" }
        if !routes.isEmpty, !routes.contains(where: { $0.matches(request.route) }) { return "route not allowed" }
        return nil
    }

    /// The elements of every field named `name` (RFC 9110 §5.6.1 lists): split at commas,
    /// spaces and tabs around them trimmed, empty ones left out.
    static func elements(of name: HTTPField.Name, in request: ProxyRequest) -> [Substring] {
        request.headers[values: name].flatMap { value in
            value.split(separator: ",", omittingEmptySubsequences: true).map(\.trimmingSpaces).filter { !$0.isEmpty }
        }
    }
}

/// A deny list worked out once per chain: header names parsed and their values lower-cased,
/// rules' item ids read as integers, methods listed: matching them per request cost a hit in
/// front of a cache some 2,000 instructions (callgrind) when they were worked out each time.
struct DenyRules: Sendable {
    let rules: RuleSet
    private let isEmpty: Bool
    /// In the order the rule set lists them; names that are no field name are left out (no
    /// field can match them).
    private let headers: [(name: String, field: HTTPField.Name, values: Set<String>)]
    private let methods: [String]
    private let routes: [(pattern: RoutePattern, integerID: Int?)]

    init(_ rules: RuleSet) {
        self.rules = rules
        isEmpty = rules.isEmpty
        headers = rules.headers.compactMap { name, values in
            HTTPField.Name(name).map { (name, $0, Set(values.map { $0.lowercased() })) }
        }
        methods = Array(rules.methods)
        routes = rules.routes.map { ($0, $0.integerID) }
    }

    /// The first kind of rule the request matches, if any. A header rule matches when any
    /// element of any field of that name is listed, compared without case: a caller cannot
    /// slip a denied value past it in a list (`666, 1`), a second field or other case.
    func firstMatch(_ request: ProxyRequest) -> String? {
        guard !isEmpty else { return nil }
        if let client = request.client, let network = rules.clients.first(where: { $0.contains(client) }) { return "client \(network)" }
        if rules.namesCallers, let caller = rules.callerMatch(request.peer) { return caller }
        for header in headers {
            let elements = RuleSet.elements(of: header.field, in: request)
            if elements.contains(where: { header.values.contains($0.lowercased()) }) { return "header \(header.name)" }
        }
        let method = request.method.rawValue
        if methods.contains(method) { return "method \(method)" }
        if let route = routes.first(where: { $0.pattern.matches(request.route, integerID: $0.integerID) }) { return "route \(route.pattern)" }
        return nil
    }
}

/// The upstream's "this account is blocked" signal.
public struct LearnSignal: Hashable, Sendable {
    /// The status it answers with.
    public var status: Int
    /// Top-level JSON members and the values they must have (compared as text).
    public var json: [String: String] = [:]
    /// Response headers and the values they must have.
    public var headers: [String: String] = [:]
    /// The request header that names the account; nil: Veneer's own credentials' account.
    public var accountHeader: String?
    /// How long a learned block lasts; nil: until unblocked.
    public var blockFor: Duration?

    /// Whether `response`'s status and headers are the signal's (its body not looked at).
    func matches(head response: ProxyResponse) -> Bool {
        guard response.status.code == status else { return false }
        for (name, value) in headers {
            guard let fieldName = HTTPField.Name(name), response.headers[fieldName] == value else { return false }
        }
        return true
    }

    /// Whether `response` is the signal.
    func matches(_ response: ProxyResponse) -> Bool {
        guard matches(head: response) else { return false }
        guard !json.isEmpty else { return true }
        guard let body = try? JSONValue.parse(response.body) else { return false }
        for (name, expected) in json {
            switch body[name] {
            case .string(let text)?: if text != expected { return false }
            case .number(let text)?: if text != expected { return false }
            case .bool(let flag)?: if String(flag) != expected { return false }
            default: return false
            }
        }
        return true
    }
}
