import HTTPTypes
import VeneerCore

/// One option of a decorator or origin, as `veneer decorators` lists it. The list is also
/// the set of keys the options mapping accepts.
public struct OptionDoc: Sendable {
    /// The key users write.
    public let name: String
    /// The kind of value: `duration`, `size`, `store name`, ...
    public let type: String
    /// The default, as users would write it; nil when there is none.
    public let defaultValue: String?
    /// One line on what it does.
    public let summary: String
    /// Whether it is a secret (then `NAME_file` is accepted too).
    public let isSecret: Bool

    /// Creates an option description.
    public init(_ name: String, _ type: String, default defaultValue: String? = nil, _ summary: String, secret: Bool = false) {
        self.name = name
        self.type = type
        self.defaultValue = defaultValue
        self.summary = summary
        self.isSecret = secret
    }
}

/// A metric family a decorator or origin creates, with its `# HELP` text on `/-/metrics`.
public struct MetricDescription: Sendable, Equatable {
    /// The family's name (`veneer_cache_requests_total`).
    public let name: String
    /// One sentence on what it counts or measures.
    public let help: String

    /// A family called `name`.
    public init(_ name: String, _ help: String) {
        self.name = name
        self.help = help
    }
}

/// Where a decorator stands in its chain. Factories may use it for defaults (latency_log's
/// label); decorators themselves never see it.
public struct ChainSite: Sendable, Hashable {
    /// 0 for the outermost decorator.
    public let index: Int
    /// How many decorators the chain has.
    public let count: Int

    /// Creates a site.
    public init(index: Int, count: Int) {
        self.index = index
        self.count = count
    }
}

/// Turns a decorator's options into a decorator: decodes them once into an immutable
/// value when the chain is checked, and builds the decorator around its inner handler.
///
/// It is also all the runtime and the command line know of a decorator, besides what its
/// handler adopts (``StatusReporting``, ``StatusListing``) and what it registers while it is
/// built (its admin routes, in ``BuildContext/admin``; its carried state and background work):
/// the metrics it creates, the request fields addressed to it, and the commands it adds to
/// the command line. Nothing else in Veneer names a decorator.
public struct DecoratorFactory: Sendable {
    /// The name used in chains.
    public let name: String
    /// One line on what the decorator does.
    public let summary: String
    /// Its options.
    public let options: [OptionDoc]
    /// Whether it may answer a request without passing it on (a cache's hit): what stands
    /// inside it then never sees that request.
    public let answersWithoutInner: Bool
    /// Whether it needs request bodies whole (its handler adopts `ReadsRequestBodies`): in its
    /// chain no body streams, and `veneer check` warns about a resource declared `body: stream`.
    public let readsRequestBodies: Bool
    /// Request fields addressed to it rather than the upstream (`Veneer-Fault`): whatever the
    /// chain, no origin passes them on, and a cache lets no request that carries one share
    /// another's answer (``BuildContext/requestDirectives``).
    public let requestDirectives: [HTTPField.Name]
    /// The metric families it creates, with their help text.
    public let metrics: [MetricDescription]
    /// The commands it adds to the command line.
    public let commands: [CommandLineAction]
    let decodeOptions: @Sendable (ConfigMapping, ChainSite) -> (any Sendable)?
    let makeHandler: @Sendable (any Sendable, any Handler, BuildContext) async throws -> any Handler
    let warnAbout: @Sendable (any Sendable, EnvironmentSpec, ChainSite) -> [String]

    /// Creates a factory from a typed decoder and builder. `warn` finds what `veneer check`
    /// should warn about without building anything (a folder that cannot be written, an
    /// entry where it stands in the chain, ...); `requestDirectives`, `metrics` and `commands`
    /// are what it offers besides the decorator.
    public init<Options: Sendable>(
        name: String,
        summary: String,
        options: [OptionDoc],
        answersWithoutInner: Bool = false,
        readsRequestBodies: Bool = false,
        requestDirectives: [HTTPField.Name] = [],
        metrics: [MetricDescription] = [],
        commands: [CommandLineAction] = [],
        decode: @escaping @Sendable (ConfigMapping, ChainSite) -> Options?,
        make: @escaping @Sendable (Options, any Handler, BuildContext) async throws -> any Handler,
        warn: @escaping @Sendable (Options, EnvironmentSpec, ChainSite) -> [String] = { _, _, _ in [] }
    ) {
        self.name = name
        self.summary = summary
        self.options = options
        self.answersWithoutInner = answersWithoutInner
        self.readsRequestBodies = readsRequestBodies
        self.requestDirectives = requestDirectives
        self.metrics = metrics
        self.commands = commands
        self.decodeOptions = { decode($0, $1) }
        self.warnAbout = { options, environment, site in (options as? Options).map { warn($0, environment, site) } ?? [] }
        self.makeHandler = { options, inner, context in
            guard let typed = options as? Options else {
                preconditionFailure("\(name): options of type \(type(of: options)) given to a factory for \(Options.self)")
            }
            return try await make(typed, inner, context)
        }
    }

    /// The keys its options mapping accepts.
    public var allowedKeys: [String] { options.flatMap { $0.isSecret ? [$0.name, $0.name + "_file"] : [$0.name] } }

    /// Builds the decorator around `inner`.
    public func make(options: any Sendable, inner: any Handler, context: BuildContext) async throws -> any Handler {
        try await makeHandler(options, inner, context)
    }

    /// What `veneer check` warns about for these options at `site` of `environment`'s chain
    /// (nothing is built).
    public func warnings(options: any Sendable, environment: EnvironmentSpec, site: ChainSite) -> [String] {
        warnAbout(options, environment, site)
    }
}

/// Turns an origin's options into an origin (a handler that answers by itself).
public struct OriginFactory: Sendable {
    /// The name used under `origin:`.
    public let name: String
    /// One line on what the origin does.
    public let summary: String
    /// Its options.
    public let options: [OptionDoc]
    /// The metric families it creates, with their help text.
    public let metrics: [MetricDescription]
    /// Whether it needs request bodies whole (its handler adopts `ReadsRequestBodies`), as
    /// ``DecoratorFactory/readsRequestBodies``.
    public let readsRequestBodies: Bool
    let decodeOptions: @Sendable (ConfigMapping) -> (any Sendable)?
    let makeHandler: @Sendable (any Sendable, BuildContext) async throws -> any Handler

    /// Creates a factory from a typed decoder and builder.
    public init<Options: Sendable>(
        name: String,
        summary: String,
        options: [OptionDoc],
        metrics: [MetricDescription] = [],
        readsRequestBodies: Bool = false,
        decode: @escaping @Sendable (ConfigMapping) -> Options?,
        make: @escaping @Sendable (Options, BuildContext) async throws -> any Handler
    ) {
        self.name = name
        self.summary = summary
        self.options = options
        self.metrics = metrics
        self.readsRequestBodies = readsRequestBodies
        self.decodeOptions = { decode($0) }
        self.makeHandler = { options, context in
            guard let typed = options as? Options else {
                preconditionFailure("\(name): options of type \(type(of: options)) given to a factory for \(Options.self)")
            }
            return try await make(typed, context)
        }
    }

    /// The keys its options mapping accepts.
    public var allowedKeys: [String] { options.flatMap { $0.isSecret ? [$0.name, $0.name + "_file"] : [$0.name] } }

    /// Builds the origin.
    public func make(options: any Sendable, context: BuildContext) async throws -> any Handler {
        try await makeHandler(options, context)
    }
}

/// The one place where names map to factories. ``Registry/standard`` (in VeneerRuntime)
/// holds Veneer's own; code that links Veneer as a library registers more.
public struct Registry: Sendable {
    /// Decorator factories by name.
    public private(set) var decorators: [String: DecoratorFactory] = [:]
    /// Origin factories by name.
    public private(set) var origins: [String: OriginFactory] = [:]

    /// A registry with these factories.
    public init(decorators: [DecoratorFactory] = [], origins: [OriginFactory] = []) {
        for factory in decorators { register(factory) }
        for factory in origins { register(factory) }
    }

    /// Adds (or replaces) a decorator factory.
    public mutating func register(_ factory: DecoratorFactory) { decorators[factory.name] = factory }

    /// Adds (or replaces) an origin factory.
    public mutating func register(_ factory: OriginFactory) { origins[factory.name] = factory }

    /// Decorator names, sorted.
    public var decoratorNames: [String] { decorators.keys.sorted() }

    /// Origin names, sorted.
    public var originNames: [String] { origins.keys.sorted() }

    /// The request fields addressed to the decorators (``DecoratorFactory/requestDirectives``), each once.
    public var requestDirectives: [HTTPField.Name] {
        var names: [HTTPField.Name] = []
        for name in decoratorNames {
            for field in decorators[name]!.requestDirectives where !names.contains(field) { names.append(field) }
        }
        return names
    }

    /// The help text of every metric family the decorators and origins declare, by name.
    public var metricHelp: [String: String] {
        let declared = decorators.values.flatMap(\.metrics) + origins.values.flatMap(\.metrics)
        return Dictionary(declared.map { ($0.name, $0.help) }, uniquingKeysWith: { first, _ in first })
    }

    /// The commands the decorators add to the command line, by name, each with the decorator
    /// that offers it: one per name (the decorator first in name order wins a clash).
    public var commands: [(action: CommandLineAction, decorator: DecoratorFactory)] {
        var offered: [(action: CommandLineAction, decorator: DecoratorFactory)] = []
        for name in decoratorNames {
            let factory = decorators[name]!
            for action in factory.commands where !offered.contains(where: { $0.action.name == action.name }) {
                offered.append((action, factory))
            }
        }
        return offered.sorted { $0.action.name < $1.action.name }
    }
}
