import Foundation
import VeneerCore

/// A `host:port` or a Unix domain socket (`unix:/path`) to listen on.
public struct ListenAddress: Hashable, Sendable, CustomStringConvertible {
    /// Host name or address (IPv6 without brackets); empty for a Unix socket.
    public let host: String
    /// Port; 0 picks a free one (0 for a Unix socket).
    public let port: Int
    /// The path of a Unix domain socket (`unix:/run/veneer/production.sock`); nil for `host:port`.
    public let socketPath: String?

    /// Creates an address.
    public init(host: String, port: Int) {
        self.host = host
        self.port = port
        socketPath = nil
    }

    /// A Unix domain socket at `socketPath`.
    public init(socketPath: String) {
        host = ""
        port = 0
        self.socketPath = socketPath
    }

    /// Parses `127.0.0.1:8080`, `[::1]:8080`, `localhost:8080` or `unix:/path`.
    public init?(_ text: String) {
        if text.hasPrefix("unix:") {
            let path = String(text.dropFirst(5))
            guard !path.isEmpty, !path.contains("\0") else { return nil }
            self.init(socketPath: path)
            return
        }
        var host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":") else { return nil }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
            if host.contains(":") { return nil }
        }
        guard !host.isEmpty, let port = Int(portText), (0...65535).contains(port) else { return nil }
        if host == "*" { host = "0.0.0.0" }
        self.init(host: String(host), port: port)
    }

    /// `host:port`, with brackets around IPv6, or `unix:/path`.
    public var description: String {
        if let socketPath { return "unix:\(socketPath)" }
        return host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    /// The longest path a Unix socket address holds (`sun_path`, less its terminating zero).
    public static let maximumSocketPath = 107
}

/// `socket`: what Veneer sets on the Unix sockets it creates (not on sockets systemd passes).
public struct SocketOptions: Sendable, Hashable {
    /// The permission bits (`mode: "0660"`); nil leaves what the umask gives.
    public var mode: UInt32?
    /// The group the socket belongs to (`group: veneer-clients`), by name or number.
    public var group: String?
    /// The group's id, looked up when the configuration was checked.
    public var groupID: UInt32?

    /// No changes.
    public init() {}
}

/// Size, time and count limits of an environment's listener.
public struct Limits: Sendable, Hashable {
    /// Largest request body (413 beyond).
    public var requestBody: Int = 1 << 20
    /// Largest request header section.
    public var requestHeaders: Int = 32 << 10
    /// Largest upstream response body that is accepted (502 beyond).
    public var responseBody: Int = 16 << 20
    /// How long a whole request head may take to arrive, from its first byte (408 beyond).
    public var headerTimeout: Duration = .seconds(10)
    /// How long a request body may pause between two reads (408 beyond).
    public var bodyTimeout: Duration = .seconds(30)
    /// How many bytes of unsent answers stop the reading of a connection.
    public var outputBuffer: Int = 256 << 10
    /// `buffered`: everything held whole at once across the connections (request bodies
    /// read before the chain sees them, answers read whole by a decorator); beyond it, 503.
    public var buffered: Int = 256 << 20
    /// `buffered_wait`: how long buffering beyond ``buffered`` waits for room before its 503.
    public var bufferedWait: Duration = .milliseconds(100)
    /// `buffered_waiters`: how many may wait for room at once (more get their 503 at once).
    public var bufferedWaiters: Int = 1024
    /// How many requests may wait for their answers on one connection.
    public var pipelineDepth: Int = 16
    /// How many client connections may be open at once (per listener).
    public var connections: Int = 10_000

    /// The defaults of DESIGN.md.
    public init() {}

    /// Bodies are held whole in memory: at most 1GB each way.
    public static let requestBodyBounds = Bounded<Sizes>(0...(1 << 30))
    /// A request head is read into one buffer: 1KB to 1MB.
    public static let requestHeadersBounds = Bounded<Sizes>((1 << 10)...(1 << 20))
    /// Bodies are held whole in memory: at most 1GB each way.
    public static let responseBodyBounds = Bounded<Sizes>(0...(1 << 30))
    /// `header_timeout` and `body_timeout`: 1ms to 1h.
    public static let timeoutBounds = Bounded<Durations>(.milliseconds(1) ... .seconds(3600))
    /// Below 4KB a connection would stop reading before one small answer is out; above 64MB
    /// a slow reader holds more than any answer needs.
    public static let outputBufferBounds = Bounded<Sizes>((4 << 10)...(64 << 20))
    /// `buffered`: 1MB to 64GB.
    public static let bufferedBounds = Bounded<Sizes>((1 << 20)...(64 << 30))
    /// `buffered_wait`: none to 10s (a wait longer than a client's patience helps nobody).
    public static let bufferedWaitBounds = Bounded<Durations>(.zero ... .seconds(10))
}

/// Where the access log of an environment goes (`access_log:`): one JSON line per request.
public enum AccessLogDestination: Sendable, Hashable, CustomStringConvertible {
    /// Standard output (the journal under systemd).
    case standardOutput
    /// A file appended to, reopened on SIGHUP (log rotation).
    case file(String)

    /// `stdout` or the path.
    public var description: String {
        switch self {
        case .standardOutput: return "stdout"
        case .file(let path): return path
        }
    }
}

/// A named store of the `stores:` section.
public enum StoreSpec: Sendable, Hashable, CustomStringConvertible {
    /// A SQLite file (absolute, resolved against `state_dir`).
    case sqlite(path: String)
    /// A PostgreSQL database.
    case postgres(url: String, password: Secret?)

    /// For `veneer chain`; passwords are never shown.
    public var description: String {
        switch self {
        case .sqlite(let path): return "sqlite:\(path)"
        case .postgres(let url, _): return "postgres:\(PostgresURL.redacting(url))"
        }
    }
}

/// A decorator of a chain, with its options decoded.
public struct DecoratorSpec: Sendable {
    /// The registered name.
    public let name: String
    /// The factory that builds it.
    public let factory: DecoratorFactory
    /// The decoded options (the factory's own type).
    public let options: any Sendable
    /// The options as resolved (defaults included, secrets redacted), for display.
    public let summary: JSONValue
    /// Where it stands.
    public let site: ChainSite
    /// Where its name is written, for problems found only when it is built (a secret file).
    public var mark: SourceMark?

    /// Creates a spec.
    public init(name: String, factory: DecoratorFactory, options: any Sendable, summary: JSONValue, site: ChainSite) {
        self.name = name
        self.factory = factory
        self.options = options
        self.summary = summary
        self.site = site
    }

    /// Its options as a value compared for carrying state over reloads: the options
    /// themselves when their type is `Hashable` (Veneer's are), else their resolved summary.
    public var optionsIdentity: AnySendableHashable {
        AnySendableHashable(ifHashable: options) ?? AnySendableHashable(summary.text)
    }
}

/// The origin of an environment, with its options decoded.
public struct OriginSpec: Sendable {
    /// The registered name.
    public let name: String
    /// The factory that builds it.
    public let factory: OriginFactory
    /// The decoded options.
    public let options: any Sendable
    /// The options as resolved, for display.
    public let summary: JSONValue
    /// Where its name is written, for problems found only when it is built.
    public var mark: SourceMark?

    /// Creates a spec.
    public init(name: String, factory: OriginFactory, options: any Sendable, summary: JSONValue) {
        self.name = name
        self.factory = factory
        self.options = options
        self.summary = summary
    }

    /// Its options as a value compared for carrying state over reloads (see ``DecoratorSpec/optionsIdentity``).
    public var optionsIdentity: AnySendableHashable {
        AnySendableHashable(ifHashable: options) ?? AnySendableHashable(summary.text)
    }
}

/// One environment, fully decoded and checked: what `veneer run` builds and `veneer chain` shows.
public struct EnvironmentSpec: Sendable {
    /// Its name.
    public let name: String
    /// The file it came from (or `<built-in>`).
    public let configFile: String
    /// The listeners of the posts API (and of the admin API unless moved): `listen`, one
    /// address or a list; never empty.
    public var listeners: [ListenAddress]
    /// The first listener; setting it replaces them all (the command line's `--listen`).
    public var listen: ListenAddress {
        get { listeners[0] }
        set { listeners = [newValue] }
    }
    /// `socket`: mode and group of the Unix sockets Veneer creates.
    public var socket = SocketOptions()
    /// A separate admin listener; nil keeps the admin API under `/-/` of ``listen``.
    public var adminListen: ListenAddress?
    /// The collections exposed.
    public let resources: [Resource]
    /// Size limits.
    public let limits: Limits
    /// How long in-flight requests may take to finish at shutdown.
    public let drainTimeout: Duration
    /// How long a client connection may stay idle between requests before it is closed.
    public let idleTimeout: Duration
    /// Where persistent state lives.
    public let stateDirectory: String
    /// Where the access log goes; nil: no access log (`access_log: off`, the default).
    public var accessLog: AccessLogDestination?
    /// The stores the chain refers to.
    public let stores: [String: StoreSpec]
    /// The origin.
    public let origin: OriginSpec
    /// The decorators, outermost first.
    public let chain: [DecoratorSpec]
    /// `allowed_hosts`: Host names answered for besides the listener's own (`name`,
    /// `name:port`, `[v6]:port`, in lower case).
    public var allowedHosts: [String] = []
    /// `allowed_origins`: web origins whose pages may call the posts API (with CORS).
    public var allowedOrigins: [String] = []
    /// `pass_forwarding_headers`: forwarding headers passed on from callers (and keyed by the cache).
    public var passForwardingHeaders: [String] = []
    /// `trace`: whether answers that went through the chain carry `Server-Timing`, one entry
    /// per decorator that acted and the origin (off by default: it tells callers about the chain).
    public var trace = false
    /// `peer_identity`: on loopback TCP connections, ask the kernel who owns the client's
    /// socket (its uid), once per connection (a Unix socket's callers are always named).
    public var peerIdentity = false
    /// `telemetry`: where the spans of sampled requests go (OTLP/HTTP); nil: off (the default).
    public var telemetry: TelemetrySpec?
    /// What decoding it found to warn about that `veneer run` logs too (a resource declared
    /// `body: stream` in a chain that reads bodies whole anyway); `veneer check` reports them
    /// with the rest.
    public var warnings: [ConfigDiagnostic] = []

    /// Why the listen addresses cannot serve as they are (see ``listenProblem(_:allowedHosts:)``).
    public var listenProblems: [String] {
        (listeners + [adminListen].compactMap { $0 }).compactMap { Self.listenProblem($0, allowedHosts: allowedHosts) }
    }

    /// Why `address` cannot serve without `allowed_hosts`: a wildcard or a non-loopback address
    /// is reached by names only the operator knows, and a Host Veneer does not know gets 421.
    public static func listenProblem(_ address: ListenAddress, allowedHosts: [String]) -> String? {
        // A Unix socket is reached by no name: its file's permissions say who may connect.
        guard address.socketPath == nil, allowedHosts.isEmpty, needsAllowedHosts(address.host) else { return nil }
        return "\(address) is reached by names Veneer cannot know (a wildcard or a non-loopback address): list them in "
            + "allowed_hosts (e.g. allowed_hosts: [veneer.example.lan]); requests naming any other Host get 421"
    }

    /// Whether a `listen` host needs `allowed_hosts` (a wildcard, or not loopback): the
    /// names such a listener is reached by are the operator's to list.
    public static func needsAllowedHosts(_ host: String) -> Bool {
        if host.lowercased() == "localhost" { return false }
        guard let address = ClientAddress(host) else { return true }
        return !address.isLoopback
    }

    /// The resolved environment as JSON (secrets redacted): what `veneer chain --json` prints.
    public var summary: JSONValue {
        var members: [(String, JSONValue)] = [
            ("environment", .string(name)),
            ("config", .string(configFile)),
            ("listen", listeners.count == 1 ? .string(listen.description) : .array(listeners.map { .string($0.description) })),
            ("admin", .string(adminListen.map { "\($0)/-/" } ?? "\(listen)/-/ (loopback clients only)")),
            ("resources", .array(resources.map { .string($0.description) })),
            ("limits", .object([
                ("request_body", .string(Units.format(bytes: limits.requestBody))),
                ("request_headers", .string(Units.format(bytes: limits.requestHeaders))),
                ("response_body", .string(Units.format(bytes: limits.responseBody))),
                ("header_timeout", .string(Units.format(limits.headerTimeout))),
                ("body_timeout", .string(Units.format(limits.bodyTimeout))),
                ("output_buffer", .string(Units.format(bytes: limits.outputBuffer))),
                ("buffered", .string(Units.format(bytes: limits.buffered))),
                ("buffered_wait", .string(Units.format(limits.bufferedWait))),
                ("buffered_waiters", .int(limits.bufferedWaiters)),
                ("pipeline_depth", .int(limits.pipelineDepth)),
                ("connections", .int(limits.connections)),
            ])),
            ("allowed_hosts", .array(allowedHosts.map(JSONValue.string))),
            ("allowed_origins", .array(allowedOrigins.map { .string($0) })),
            ("pass_forwarding_headers", .array(passForwardingHeaders.map { .string($0) })),
            ("drain_timeout", .string(Units.format(drainTimeout))),
            ("idle_timeout", .string(Units.format(idleTimeout))),
            ("state_dir", .string(stateDirectory)),
            ("access_log", .string(accessLog?.description ?? "off")),
            ("trace", .bool(trace)),
            ("peer_identity", .bool(peerIdentity)),
            ("telemetry", telemetry?.summary ?? .string("off")),
        ]
        if !stores.isEmpty {
            members.append(("stores", .object(stores.keys.sorted().map { ($0, .string(stores[$0]!.description)) })))
        }
        members.append(("origin", .object([(origin.name, origin.summary)])))
        members.append(("chain", .array(chain.map { .object([($0.name, $0.summary)]) })))
        return .object(members)
    }
}
