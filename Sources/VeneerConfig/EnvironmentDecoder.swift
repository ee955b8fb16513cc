import VeneerCore

/// Store names visible to decorator options while an environment is decoded.
final class StoreCatalog {
    let names: [String]
    var referenced: Set<String> = []
    init(names: [String]) { self.names = names }
}

/// The outcome of `veneer check`.
public struct ConfigCheck: Sendable {
    /// What makes the configuration unusable, in file order.
    public var errors: [ConfigDiagnostic]
    /// What is worth knowing but does not (a secret file this machine cannot read).
    public var warnings: [ConfigDiagnostic]
    /// The environments decoded without errors.
    public var environments: [EnvironmentSpec]
    /// Every number read (duration, size, count, percentage), by key path: its bounds, as
    /// `0s...1d` (what the README's table of bounds is checked against).
    public var numbers: [String: String] = [:]
}

extension ConfigMapping {
    /// A reference to a named store (`store: local`), checked against the `stores:` section;
    /// `memory` is always available. Returns the name, or nil when absent or unknown.
    public func storeReference(_ key: String = "store") -> String? {
        guard let value = self[key], let name = value.string() else { return nil }
        let catalog = value.context.stores
        if name == "memory" {
            note(key, .string(name))
            return name
        }
        guard let catalog, catalog.names.contains(name) else {
            let known = ["memory"] + (value.context.stores?.names ?? [])
            value.error("no store named '\(name)'\(Suggestions.hint(for: name, in: known)) (stores: \(known.joined(separator: ", ")))")
            return nil
        }
        catalog.referenced.insert(name)
        note(key, .string(name))
        return name
    }
}

extension ConfigDocument {
    /// Decodes environment `name` with `registry`: every problem in it is reported at once.
    ///
    /// `variables` are used for `${VAR}`; relative file paths resolve against the file's
    /// folder (``ConfigSource/baseDirectory(workingDirectory:)``; `workingDirectory` makes a
    /// relative file name absolute).
    public func environment(
        _ name: String, registry: Registry, variables: [String: String], workingDirectory: String
    ) throws(ConfigError) -> EnvironmentSpec {
        let context = DecodingContext(variables: variables, baseDirectory: source.baseDirectory(workingDirectory: workingDirectory))
        context.sink.append(contentsOf: structuralProblems)
        let spec = decodeEnvironment(name, registry: registry, context: context)
        try context.sink.throwIfAny()
        return spec!
    }

    /// Decodes every environment and every store; returns all problems of all of them.
    public func checkAll(registry: Registry, variables: [String: String], workingDirectory: String) -> [ConfigDiagnostic] {
        check(only: nil, registry: registry, variables: variables, workingDirectory: workingDirectory).errors
    }

    /// What `veneer check` reports: the errors and the warnings (in file order) of environment
    /// `only`, or of every environment and every store when nil, and the environments decoded.
    public func check(only name: String?, registry: Registry, variables: [String: String], workingDirectory: String) -> ConfigCheck {
        let sink = DiagnosticSink()
        sink.append(contentsOf: structuralProblems)
        var specs: [EnvironmentSpec] = []
        var numbers: [String: String] = [:]
        for environment in name.map({ [$0] }) ?? environmentNames {
            let context = DecodingContext(sink: sink, variables: variables, baseDirectory: source.baseDirectory(workingDirectory: workingDirectory))
            let decoded = decodeEnvironment(environment, registry: registry, context: context)
            for (path, bounds) in context.numbers { numbers[path] = bounds }
            guard let spec = decoded else { continue }
            specs.append(spec)
            // What a factory can tell without building (a token store that cannot be written).
            for decorator in spec.chain {
                for warning in decorator.factory.warnings(options: decorator.options, environment: spec, site: decorator.site) {
                    sink.warning(decorator.mark, "environments.\(spec.name).chain[\(decorator.site.index)].\(decorator.name)", warning)
                }
            }
        }
        if name == nil {
            let context = DecodingContext(sink: sink, variables: variables, baseDirectory: source.baseDirectory(workingDirectory: workingDirectory))
            let stateDirectory = decodeStateDirectory(context)
            _ = decodeStores(context, stateDirectory: stateDirectory, only: nil)
        }
        return ConfigCheck(errors: sink.sorted, warnings: DiagnosticSink.fileOrder(sink.warnings), environments: specs, numbers: numbers)
    }

    /// The file's `state_dir` as every environment resolves it (problems with it are left to
    /// ``check(only:registry:variables:workingDirectory:)``): where an instance of it records
    /// its admin address, whichever environment it serves.
    public func stateDirectory(variables: [String: String], workingDirectory: String) -> String {
        decodeStateDirectory(DecodingContext(variables: variables, baseDirectory: source.baseDirectory(workingDirectory: workingDirectory)))
    }

    func decodeStateDirectory(_ context: DecodingContext) -> String {
        let raw = root["state_dir"].map { ConfigValue(node: $0, path: "state_dir", context: context).string() } ?? nil
        return resolve(path: raw ?? (context.variables["STATE_DIRECTORY"].flatMap { $0.split(separator: ":").first.map(String.init) } ?? ".veneer"),
                       against: context.baseDirectory)
    }

    func decodeStores(_ context: DecodingContext, stateDirectory: String, only: Set<String>?) -> [String: StoreSpec] {
        guard let node = root["stores"] else { return [:] }
        guard let mapping = ConfigValue(node: node, path: "stores", context: context).mapping(allowedKeys: nil) else { return [:] }
        var stores: [String: StoreSpec] = [:]
        for entry in mapping.entries {
            // Whichever environment is checked: the name shadows the built-in store for all.
            if entry.key == "memory" {
                context.sink.error(entry.mark, "stores.memory", "'memory' is built in; give this store another name")
                continue
            }
            guard only?.contains(entry.key) ?? true else { continue }
            guard let kinds = entry.value.mapping(allowedKeys: ["sqlite", "postgres"]) else { continue }
            guard kinds.keys.count == 1 else {
                entry.value.error("a store is one of { sqlite: PATH } or { postgres: URL }")
                continue
            }
            if let sqlite = kinds["sqlite"] {
                var pathValue: ConfigValue? = sqlite
                if case .mapping = sqlite.node { pathValue = sqlite.mapping(allowedKeys: ["path"])?.required("path") }
                if let path = pathValue?.string() {
                    stores[entry.key] = .sqlite(path: resolve(path: path, against: stateDirectory))
                }
            } else if let postgres = kinds["postgres"] {
                if case .mapping = postgres.node {
                    guard let options = postgres.mapping(allowedKeys: ["url", "password", "password_file"]) else { continue }
                    if let urlValue = options.required("url"), let url = urlValue.string() {
                        Self.checkPostgres(url, urlValue)
                        stores[entry.key] = .postgres(url: url, password: options.secret("password"))
                    }
                } else if let url = postgres.string() {
                    Self.checkPostgres(url, postgres)
                    stores[entry.key] = .postgres(url: url, password: nil)
                }
            } else {
                entry.value.error("a store is one of { sqlite: PATH } or { postgres: URL }")
            }
        }
        return stores
    }

    /// What the store would refuse when it opens (`veneer run` exits 78 on it): the scheme,
    /// the host, the port, `sslmode` and `pool_size`.
    static func checkPostgres(_ url: String, _ value: ConfigValue) {
        guard url.hasPrefix("postgres://") || url.hasPrefix("postgresql://") else {
            value.error("\(quoted(PostgresURL.redacting(url))) is not a postgres:// URL")
            return
        }
        if case .failure(let problem) = PostgresURL.parts(url) { value.error(problem.message) }
    }

    func decodeEnvironment(_ name: String, registry: Registry, context: DecodingContext) -> EnvironmentSpec? {
        guard let node = resolvedEnvironment(name, sink: context.sink) else { return nil }
        let base = "environments.\(name)"
        let environment = ConfigMapping(mapping: node, value: ConfigValue(node: .mapping(node), path: base, context: context))
        _ = environment.value.mapping(allowedKeys: Self.environmentKeys)

        let stateDirectory = decodeStateDirectory(context)
        let storeNames: [String] = {
            guard case .mapping(let stores)? = root["stores"] else { return [] }
            return stores.keys
        }()
        context.stores = StoreCatalog(names: storeNames)

        var listeners = [ListenAddress(host: "127.0.0.1", port: 8080)]
        if let value = environment["listen"] {
            let items = value.node.isList ? value.list() ?? [] : [value]
            let parsed = items.compactMap { decodeListenAddress($0, example: "127.0.0.1:8080, [::1]:8080 or unix:/run/veneer/NAME.sock") }
            if !parsed.isEmpty { listeners = parsed } else if items.isEmpty, value.node.isList { value.error("must list at least one address") }
        }

        var adminListen: ListenAddress?
        if let admin = environment.mapping("admin", allowedKeys: ["listen"]), let value = admin["listen"] {
            adminListen = decodeListenAddress(value, example: "127.0.0.1:9090 or unix:/run/veneer/NAME-admin.sock")
        }
        let socket = decodeSocketOptions(environment)

        var streamed: [ConfigValue] = []
        let resources = decodeResources(environment["resources"], streamed: &streamed)
        let (allowedHosts, allowedOrigins) = decodeAccess(environment)
        var passed: [String] = []
        for item in environment["pass_forwarding_headers"]?.list() ?? [] {
            guard let text = item.string() else { continue }
            if ForwardingHeaders.stripped.contains(text.lowercased()) {
                passed.append(text)
            } else {
                item.error("\(quoted(text)) is not a forwarding header Veneer strips (\(ForwardingHeaders.stripped.joined(separator: ", ")))")
            }
        }

        var limits = Limits()
        let limitKeys = ["request_body", "request_headers", "response_body", "header_timeout", "body_timeout", "output_buffer",
                         "pipeline_depth", "connections", "buffered", "buffered_wait", "buffered_waiters"]
        if let mapping = environment.mapping("limits", allowedKeys: limitKeys) {
            limits.requestBody = mapping.size("request_body", default: limits.requestBody, in: Limits.requestBodyBounds) ?? limits.requestBody
            limits.requestHeaders = mapping.size("request_headers", default: limits.requestHeaders, in: Limits.requestHeadersBounds)
                ?? limits.requestHeaders
            limits.responseBody = mapping.size("response_body", default: limits.responseBody, in: Limits.responseBodyBounds) ?? limits.responseBody
            limits.headerTimeout = mapping.duration("header_timeout", default: limits.headerTimeout, in: Limits.timeoutBounds) ?? limits.headerTimeout
            limits.bodyTimeout = mapping.duration("body_timeout", default: limits.bodyTimeout, in: Limits.timeoutBounds) ?? limits.bodyTimeout
            limits.outputBuffer = mapping.size("output_buffer", default: limits.outputBuffer, in: Limits.outputBufferBounds) ?? limits.outputBuffer
            limits.pipelineDepth = mapping.int("pipeline_depth", default: limits.pipelineDepth, in: 1...1024) ?? limits.pipelineDepth
            limits.connections = mapping.int("connections", default: limits.connections, in: 1...1_000_000) ?? limits.connections
            limits.buffered = mapping.size("buffered", default: limits.buffered, in: Limits.bufferedBounds) ?? limits.buffered
            limits.bufferedWait = mapping.duration("buffered_wait", default: limits.bufferedWait, in: Limits.bufferedWaitBounds)
                ?? limits.bufferedWait
            limits.bufferedWaiters = mapping.int("buffered_waiters", default: limits.bufferedWaiters, in: 0...1_000_000) ?? limits.bufferedWaiters
        }
        let drainTimeout = environment.duration("drain_timeout", default: .seconds(10), in: .init(.zero ... .seconds(3600))) ?? .seconds(10)
        let idleTimeout = environment.duration("idle_timeout", default: .seconds(75), in: .init(.milliseconds(1) ... .days(1))) ?? .seconds(75)
        let accessLog = decodeAccessLog(environment["access_log"])
        let trace = environment["trace"]?.bool() ?? false
        let peerIdentity = environment["peer_identity"]?.bool() ?? false
        let telemetry = decodeTelemetry(environment["telemetry"], context: context)

        let origin = decodeOrigin(environment, registry: registry)
        let chain = decodeChain(environment, registry: registry)

        let referenced = context.stores?.referenced ?? []
        let stores = decodeStores(context, stateDirectory: stateDirectory, only: referenced)
        guard let origin, let chain else { return nil }
        // A handler that reads bodies whole makes every body of the chain read whole: say so
        // rather than let `body: stream` be ignored in silence.
        let readers = chain.filter(\.factory.readsRequestBodies).map(\.name) + (origin.factory.readsRequestBodies ? [origin.name] : [])
        var warnings: [ConfigDiagnostic] = []
        if let reader = readers.first {
            for value in streamed {
                let message = "bodies are read whole anyway (up to limits.request_body): \(reader) reads request bodies whole, so none streams in this chain"
                context.sink.warning(value.mark, value.path, message)
                warnings.append(ConfigDiagnostic(mark: value.mark, path: value.path, message: message, severity: .warning))
            }
        }
        for (key, address) in listeners.map({ ("listen", $0) }) + [("admin", adminListen)] {
            guard let address, let problem = EnvironmentSpec.listenProblem(address, allowedHosts: allowedHosts) else { continue }
            (environment[key] ?? environment.value).error(problem)
        }
        var spec = EnvironmentSpec(
            name: name, configFile: source.file, listeners: listeners, socket: socket, adminListen: adminListen, resources: resources,
            limits: limits, drainTimeout: drainTimeout, idleTimeout: idleTimeout, stateDirectory: stateDirectory, accessLog: accessLog, stores: stores,
            origin: origin, chain: chain, allowedHosts: allowedHosts, allowedOrigins: allowedOrigins, passForwardingHeaders: passed)
        spec.trace = trace
        spec.peerIdentity = peerIdentity
        spec.telemetry = telemetry
        spec.warnings = warnings
        return spec
    }

    /// `allowed_hosts` (`name`, `name:port`, `[v6]:port`) and `allowed_origins`
    /// (`scheme://host[:port]`, no path): what the edge answers for besides its own names.
    func decodeAccess(_ environment: ConfigMapping) -> ([String], [String]) {
        var hosts: [String] = []
        for item in environment["allowed_hosts"]?.list() ?? [] {
            guard let text = item.string() else { continue }
            if let (host, port) = AuthoritySyntax.hostPattern(text), !["0.0.0.0", "[::]"].contains(host) {
                hosts.append(port.map { "\(host):\($0)" } ?? host)
            } else {
                item.error("\(quoted(text)) is not a host name (use e.g. veneer.example.lan or veneer.example.lan:8080; no wildcards)")
            }
        }
        var origins: [String] = []
        for item in environment["allowed_origins"]?.list() ?? [] {
            guard let text = item.string() else { continue }
            if AuthoritySyntax.normalizedOrigin(text) != nil {
                origins.append(text)
            } else {
                item.error("\(quoted(text)) is not an origin (use e.g. http://localhost:3000: scheme, host and port, no path; no wildcards)")
            }
        }
        return (hosts, origins)
    }

    /// `off` (or absent), `stdout`, or a file path (relative to the working directory).
    func decodeAccessLog(_ value: ConfigValue?) -> AccessLogDestination? {
        guard let value, let text = value.string() else { return nil }
        switch text {
        case "off", "false": return nil
        case "stdout": return .standardOutput
        default:
            guard let path = value.filePath() else { return nil }
            if let problem = FileCheck.openProblem(path, folders: .last) { value.error("cannot open the access log \(path): \(problem)") }
            return .file(path)
        }
    }

    /// The `resources` list; `streamed` gets the `body: stream` values (for their marks).
    func decodeResources(_ value: ConfigValue?, streamed: inout [ConfigValue]) -> [Resource] {
        guard let value else { return [.posts] }
        guard let items = value.list() else { return [.posts] }
        var resources: [Resource] = []
        for item in items {
            var resource: Resource?
            if case .scalar = item.node {
                guard let name = item.string() else { continue }
                resource = name == "posts" ? .posts : Resource(name: name, kind: .integer)
            } else if let mapping = item.mapping(allowedKeys: ["name", "id", "body"]) {
                guard let name = mapping.required("name")?.string() else { continue }
                let kind = mapping["id"]?.choice(["integer", "string"]) ?? "integer"
                if name == "posts" && kind != "integer" { mapping.error("id", "posts has integer ids") }
                let body = mapping["body"]?.choice(["whole", "stream"]) ?? "whole"
                if body == "stream", name != "posts", let value = mapping["body"] { streamed.append(value) }
                if name == "posts" && body == "stream" { mapping.error("body", "posts bodies are validated, so they are read whole") }
                resource = name == "posts" ? .posts : Resource(name: name, kind: kind == "string" ? .string : .integer, streamsBodies: body == "stream")
            }
            guard let resource else { continue }
            if resource.name.isEmpty || resource.name.utf8.count > 64 || !resource.name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) {
                item.error("\(quoted(resource.name)) is not a collection name (letters, digits, '-', '_')")
            } else if resource.name == "-" {
                item.error("'-' is reserved for the admin API")
            } else if resources.contains(where: { $0.name == resource.name }) {
                item.error("'\(resource.name)' is listed twice")
            } else {
                resources.append(resource)
            }
        }
        if resources.isEmpty { value.error("at least one resource is needed") }
        return resources
    }

    func decodeOrigin(_ environment: ConfigMapping, registry: Registry) -> OriginSpec? {
        guard let value = environment.required("origin") else { return nil }
        let names = registry.originNames
        guard case .mapping(let mapping) = value.node, mapping.entries.count == 1, let entry = mapping.entries.first else {
            value.error("an origin is one of: \(names.map { "{ \($0): {...} }" }.joined(separator: ", "))")
            return nil
        }
        let name = entry.key.value
        guard let factory = registry.origins[name] else {
            value.context.sink.error(entry.key.mark, value.childPath(name),
                                     "unknown origin '\(name)'\(Suggestions.hint(for: name, in: names)) (known: \(names.joined(separator: ", ")))")
            return nil
        }
        let optionsValue = ConfigValue(node: entry.value, path: value.childPath(name), context: value.context)
        let before = value.context.sink.diagnostics.count
        guard let options = optionsValue.mapping(allowedKeys: factory.allowedKeys) else { return nil }
        let decoded = factory.decodeOptions(options)
        guard let decoded, value.context.sink.diagnostics.count == before else { return nil }
        var origin = OriginSpec(name: name, factory: factory, options: decoded, summary: .object(options.summary))
        origin.mark = entry.key.mark
        return origin
    }

    func decodeChain(_ environment: ConfigMapping, registry: Registry) -> [DecoratorSpec]? {
        guard let value = environment["chain"] else { return [] }
        guard let items = value.list() else { return nil }
        let names = registry.decoratorNames
        var chain: [DecoratorSpec] = []
        var failed = false
        for (index, item) in items.enumerated() {
            let name: String
            let nameMark: SourceMark
            let optionsNode: ConfigNode
            switch item.node {
            case .scalar(let scalar) where !scalar.isNull:
                name = scalar.value
                nameMark = scalar.mark
                optionsNode = .scalar(.init(value: "", quoted: false, mark: scalar.mark))
            case .mapping(let mapping) where mapping.entries.count == 1:
                name = mapping.entries[0].key.value
                nameMark = mapping.entries[0].key.mark
                optionsNode = mapping.entries[0].value
            default:
                item.error("a chain entry is a decorator name or a one-key mapping 'name: {options}'")
                failed = true
                continue
            }
            guard let factory = registry.decorators[name] else {
                item.context.sink.error(nameMark, item.path,
                                        "unknown decorator '\(name)'\(Suggestions.hint(for: name, in: names)) (known: \(names.joined(separator: ", ")))")
                failed = true
                continue
            }
            let optionsValue = ConfigValue(node: optionsNode, path: "\(item.path).\(name)", context: item.context)
            let before = item.context.sink.diagnostics.count
            guard let options = optionsValue.mapping(allowedKeys: factory.allowedKeys) else { failed = true; continue }
            let site = ChainSite(index: index, count: items.count)
            guard let decoded = factory.decodeOptions(options, site), item.context.sink.diagnostics.count == before else {
                failed = true
                continue
            }
            var decorator = DecoratorSpec(name: name, factory: factory, options: decoded, summary: .object(options.summary), site: site)
            decorator.mark = nameMark
            chain.append(decorator)
        }
        return failed ? nil : chain
    }
}
