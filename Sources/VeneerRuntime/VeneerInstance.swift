import Foundation
import Logging
import Metrics
import NIOCore
import NIOPosix
import Prometheus
import ServiceLifecycle
import Synchronization
import UnixSignals
import VeneerConfig
import VeneerCore
import VeneerOrigins
import VeneerServer

/// What a running instance is told about itself once its listeners accept connections.
public struct ReadyInfo: Sendable {
    /// The port of the posts API listener (useful when the configuration says port 0).
    public let port: Int
    /// The port of the separate admin listener, if there is one.
    public let adminPort: Int?
}

/// How to start an instance: where its configuration comes from and what it is given.
public struct InstanceConfiguration: Sendable {
    /// Reads the configuration (again at each reload).
    public var readSource: @Sendable () throws(ConfigError) -> ConfigSource
    /// The environment to start with (``VeneerInstance/servingEnvironment`` is the one
    /// serving: a switch changes it, and a reload re-reads that one).
    public var environment: String
    /// The process environment, for `${VAR}`.
    public var variables: [String: String]
    /// Where relative paths resolve.
    public var workingDirectory: String
    /// Names to factories.
    public var registry: Registry
    /// Time.
    public var clock: any VeneerClock
    /// The logger.
    public var logger: Logger
    /// The event loops of the listeners and the HTTP clients.
    public var eventLoopGroup: any EventLoopGroup
    /// Listen here instead of the environment's `listen` (the command line's `--listen`).
    public var listenOverride: ListenAddress?

    /// Creates a configuration.
    public init(readSource: @escaping @Sendable () throws(ConfigError) -> ConfigSource, environment: String,
                variables: [String: String] = ProcessInfo.processInfo.environment,
                workingDirectory: String = FileManager.default.currentDirectoryPath,
                registry: Registry = .standard, clock: any VeneerClock = SystemClock(),
                logger: Logger = Logger(label: "veneer.runtime"),
                eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) {
        self.readSource = readSource
        self.environment = environment
        self.variables = variables
        self.workingDirectory = workingDirectory
        self.registry = registry
        self.clock = clock
        self.logger = logger
        self.eventLoopGroup = eventLoopGroup
    }

    /// Reads and decodes the environment: every problem at once.
    public func loadSpec() throws(ConfigError) -> EnvironmentSpec {
        try loadSpec(environment: environment) { _ in }
    }

    /// Reads and decodes environment `environment` of the file (the one serving, after a
    /// switch); `read` is given the file's environment names once it parses.
    func loadSpec(environment: String, read: ([String]) -> Void) throws(ConfigError) -> EnvironmentSpec {
        let document = try ConfigDocument(source: try readSource())
        read(document.environmentNames)
        var spec = try document.environment(environment, registry: registry, variables: variables, workingDirectory: workingDirectory)
        if let listenOverride {
            spec.listen = listenOverride
            if let problem = EnvironmentSpec.listenProblem(listenOverride, allowedHosts: spec.allowedHosts) {
                throw ConfigError([ConfigDiagnostic(mark: nil, path: "--listen", message: problem)])
            }
        }
        return spec
    }
}

/// One running Veneer: its listeners, its active chain, reload and shutdown. A `Service`:
/// run it in a `ServiceGroup` (the command line does, with SIGTERM/SIGINT as graceful
/// shutdown signals), and it serves until graceful shutdown, draining in-flight requests.
public final class VeneerInstance: Service, Sendable, CustomStringConvertible {
    /// What it was started with.
    public let configuration: InstanceConfiguration
    /// Health reports of the components.
    public let health: HealthBoard
    /// The Prometheus registry behind `/-/metrics`.
    public let metrics: PrometheusCollectorRegistry
    let transports: StandardTransportProvider
    /// The background loops of carried state, and the release of what old chains used.
    let background: BackgroundRunner
    /// The stores with connections of their own (postgres), from the moment they open.
    let storeRunner: BackgroundRunner
    let reloadStatus = ReloadStatus()
    /// The sd_notify channel (silent without `NOTIFY_SOCKET`).
    public let notifier: SystemdNotifier
    let reloads = ReloadQueue()
    let onReady: @Sendable (ReadyInfo) async -> Void
    let logger: Logger
    /// The environment as read at start; ``run()`` builds the first chain from it.
    let firstSpec: EnvironmentSpec
    /// The environment's access log (`access_log:`), opened at start, reopened on SIGHUP.
    public let accessLog: AccessLog?
    /// What the listeners count.
    let edgeMetrics: EdgeMetrics
    /// The last requests answered, for the status page.
    let feed = RequestFeed()
    /// `veneer_config_last_reload_successful` and `..._success_timestamp_seconds`.
    let reloadSuccessful: Prometheus.Gauge
    let reloadSuccessTime: Prometheus.Gauge
    /// When it was created, for the uptime `/-/health` reports.
    let startedAt: Date
    private let active = Mutex<ActiveChain?>(nil)
    /// The environment names of the file as last read.
    let environmentNames: Mutex<[String]>
    /// Where the admin API listens, recorded in the serving environment's address file.
    let adminAddress: AdminAddressRecord
    /// `veneer_environment_info{environment="..."}`: the series of the environment serving.
    let environmentInfo: Mutex<Prometheus.Gauge?>

    /// Reads and checks the configuration, and starts nothing: ``run()`` builds the first
    /// chain, once the services that chain needs (its stores' connections) run. Throws every
    /// problem of the configuration file (the command line exits 78 on them; problems found
    /// while building, such as an unreadable secret, come from ``run()`` as a `ConfigError`).
    public init(configuration: InstanceConfiguration, onReady: @escaping @Sendable (ReadyInfo) async -> Void = { _ in }) async throws(ConfigError) {
        self.configuration = configuration
        self.onReady = onReady
        self.logger = configuration.logger
        self.notifier = SystemdNotifier(variables: configuration.variables)
        var names: [String] = []
        firstSpec = try configuration.loadSpec(environment: configuration.environment) { names = $0 }
        environmentNames = Mutex(names)
        adminAddress = AdminAddressRecord(stateDirectory: firstSpec.stateDirectory, environment: firstSpec.name)
        startedAt = configuration.clock.now()
        metrics = PrometheusCollectorRegistry()
        let factory = DescribedMetricsFactory(registry: metrics)
        do throws(AccessLogError) {
            let dropped = Counter(label: "veneer_access_log_dropped_lines_total", factory: factory)
            // At debug level (--log-level, VENEER_LOG_LEVEL) each line says what every decorator did.
            let trace = configuration.logger.logLevel <= .debug
            accessLog = try firstSpec.accessLog.map { destination throws(AccessLogError) in
                switch destination {
                case .standardOutput: return try AccessLog(output: .standardOutput, dropped: dropped, trace: trace)
                case .file(let path): return try AccessLog(output: .file(path), dropped: dropped, trace: trace)
                }
            }
        } catch {
            throw ConfigError([ConfigDiagnostic(mark: nil, path: "access_log", message: error.description)])
        }
        edgeMetrics = EdgeMetrics(factory: factory)
        metrics.makeGauge(descriptor: DescribedMetricsFactory.descriptor("veneer_build_info"), labels: [("version", VeneerVersion.text)])
            .set(to: 1)
        reloadSuccessful = metrics.makeGauge(descriptor: DescribedMetricsFactory.descriptor("veneer_config_last_reload_successful"))
        reloadSuccessTime = metrics.makeGauge(descriptor: DescribedMetricsFactory.descriptor("veneer_config_last_reload_success_timestamp_seconds"))
        environmentInfo = Mutex(nil)
        health = HealthBoard()
        transports = StandardTransportProvider(eventLoopGroup: configuration.eventLoopGroup, metrics: UpstreamMetrics(factory: factory))
        background = BackgroundRunner(logger: configuration.logger)
        storeRunner = BackgroundRunner(logger: configuration.logger, description: "the store connections (postgres), closed after the background loops")
    }

    /// The chain, if ``run()`` has built it.
    var activeChain: ActiveChain? { active.withLock { $0 } }

    /// The chain serving new requests, from the moment ``run()`` has built the first one
    /// (before it listens).
    public var chain: ActiveChain {
        guard let chain = active.withLock({ $0 }) else { preconditionFailure("the chain is built by run(), before it listens") }
        return chain
    }

    func context(spec: EnvironmentSpec, carried: CarriedState) -> BuildContext {
        let factory = DescribedMetricsFactory(registry: metrics)
        var context = BuildContext(
            logger: configuration.logger, clock: configuration.clock, metrics: factory, transports: transports,
            stateDirectory: spec.stateDirectory, resources: spec.resources,
            limits: BuildLimits(responseBody: spec.limits.responseBody), carried: carried, health: health,
            stores: StoreRegistry(specs: spec.stores, carried: carried, health: health, logger: configuration.logger, runner: storeRunner))
        context.passedForwardingHeaders = ForwardingHeaders(passing: spec.passForwardingHeaders).passed
        context.environment = spec.name
        return context
    }

    /// What bounds the listeners' connections; fixed when they start (a reload warns of changes).
    static func connectionLimits(_ spec: EnvironmentSpec) -> ConnectionLimits {
        ConnectionLimits(
            requestHeaders: spec.limits.requestHeaders, headerTimeout: spec.limits.headerTimeout, bodyTimeout: spec.limits.bodyTimeout,
            idleTimeout: spec.idleTimeout, outputBuffer: spec.limits.outputBuffer, pipelineDepth: spec.limits.pipelineDepth,
            connections: spec.limits.connections)
    }

    /// `the Veneer instance serving development (config/veneer.yaml)`: what the service
    /// group's log lines call it.
    public var description: String { "the Veneer instance serving \(servingEnvironment) (\(firstSpec.configFile))" }

    /// Builds the first chain and listens, until graceful shutdown.
    public func run() async throws {
        let spec = firstSpec
        logger.info("veneer starting", metadata: [
            "environment": .string(spec.name), "config": .string(spec.configFile), "listen": .string(spec.listen.description),
            "chain": .string(spec.chain.map(\.name).joined(separator: " -> ") + (spec.chain.isEmpty ? "" : " -> ") + spec.origin.name),
        ])
        // What every chain needs, started first and shut down last, in reverse: the chain
        // drains, background loops end (flushing caches), the stores close, the HTTP clients last.
        var groupConfiguration = ServiceGroupConfiguration(services: [
            AccessLogService(log: accessLog),
            WatchdogService(notifier: notifier, eventLoopGroup: configuration.eventLoopGroup, logger: logger),
            TransportShutdown(transports: transports), storeRunner, background, DrainOnShutdown(instance: self),
        ], logger: logger)
        groupConfiguration.maximumGracefulShutdownDuration = spec.drainTimeout
        groupConfiguration.maximumCancellationDuration = .seconds(5)
        let group = ServiceGroup(configuration: groupConfiguration)
        // The file of the environment serving at exit (a switch moves it).
        defer { adminAddress.remove() }
        do {
            try await serve(group, spec: spec)
        } catch {
            await accessLog?.close()
            throw error
        }
        await accessLog?.close()
        await releaseAll()
        logger.info("veneer stopped", metadata: ["environment": .string(servingEnvironment)])
    }

    /// Runs the service group, adding the services that serve once the first chain is built.
    private func serve(_ group: ServiceGroup, spec: EnvironmentSpec) async throws {
        // Tasks say whether they are the service group's run (true) or the adding of services.
        try await withThrowingTaskGroup(of: Bool.self) { tasks in
            tasks.addTask {
                try await group.run()
                return true
            }
            // The first chain: its stores' connections already run. One build at a time:
            // a reload asked for meanwhile waits for it.
            let chain: ActiveChain
            switch await reloads.run({ await self.buildFirst(spec) }) {
            case .success(let built):
                chain = built
            case .failure(let error):
                tasks.cancelAll()
                throw error
            }
            // Then what serves, shut down first: the listeners drain their connections, then
            // reloads stop. Added from a task of its own: a listener that fails at once (its
            // address taken) ends the group while later services are still being added, and
            // adding to a group that no longer takes them waits until cancelled, which
            // leaving this task group does.
            let services = serving(chain, spec: spec)
            tasks.addTask {
                for service in services { await group.addServiceUnlessShutdown(service) }
                return false
            }
            // Until the service group ends; an adding still waiting then is cancelled (an
            // error of the group's leaves this task group, which cancels it too).
            while let groupEnded = try await tasks.next() {
                if groupEnded { tasks.cancelAll() }
            }
        }
    }

    /// The first chain, held by the instance from now on.
    private func buildFirst(_ spec: EnvironmentSpec) async -> Result<ActiveChain, ConfigError> {
        let carried = CarriedState()
        let context = context(spec: spec, carried: carried)
        do {
            let built = try await ChainBuilder.build(spec, context: context)
            let chain = ActiveChain(ChainGeneration(chain: built, spec: spec, loadedAt: configuration.clock.now(), number: 1, carried: carried,
                                                    adminRoutes: context.admin))
            adopt(carried)
            active.withLock { $0 = chain }
            await carried.commit()
            noteLoad(succeeded: true)
            noteServing(spec.name)
            return .success(chain)
        } catch {
            await release(carried.fresh())
            return .failure(error)
        }
    }

    /// The services that serve `chain`, in the order they start: SIGHUP, the listeners, and
    /// the STOPPING notice (first to go at shutdown).
    private func serving(_ chain: ActiveChain, spec: EnvironmentSpec) -> [any Service] {
        var admin = AdminAPI(chain: chain, health: health, metrics: metrics, reloadStatus: reloadStatus,
                             configPath: ConfigIdentity.canonicalPath(spec.configFile, workingDirectory: configuration.workingDirectory),
                             startedAt: startedAt, clock: configuration.clock, reload: { await self.reload() })
        admin.feed = feed
        admin.switchEnvironment = { await self.switchEnvironment(to: $0) }
        admin.environments = { self.environments }
        admin.switchRefusal = switchRefusal
        let readiness = Readiness(expected: spec.adminListen == nil ? 1 : 2) { [onReady, logger, notifier, chain, adminAddress] info in
            // Where the admin API really listens (port 0 picks one): `veneer unblock` reads it.
            let host = spec.adminListen?.host ?? spec.listen.host
            do {
                try adminAddress.record(ListenAddress(host: host, port: info.adminPort ?? info.port))
            } catch {
                logger.debug("could not record the admin address", metadata: ["error": .string(ErrorText.describe(error))])
            }
            // Only now do the listeners accept connections: tell systemd.
            notifier.ready(status: Self.statusLine(chain.generation))
            await onReady(info)
        }
        var services: [any Service] = [ReloadOnHangup(instance: self)]
        services.append(Listener.make(
            host: spec.listen.host, port: spec.listen.port,
            edge: ProxyEdge(chain: chain, admin: admin, logger: logger, adminOnly: false, servesAdmin: spec.adminListen == nil,
                            accessLog: accessLog, metrics: edgeMetrics, feed: feed),
            limits: Self.connectionLimits(spec), eventLoopGroup: configuration.eventLoopGroup, logger: logger,
            onBound: { port in await readiness.bound(main: port) }))
        if let adminListen = spec.adminListen {
            services.append(Listener.make(
                host: adminListen.host, port: adminListen.port,
                edge: ProxyEdge(chain: chain, admin: admin, logger: logger, adminOnly: true, servesAdmin: true, accessLog: accessLog,
                            metrics: edgeMetrics, feed: feed),
                limits: Self.connectionLimits(spec), eventLoopGroup: configuration.eventLoopGroup, logger: logger,
                onBound: { port in await readiness.bound(admin: port) }))
        }
        services.append(StoppingNotice(notifier: notifier))
        return services
    }

    /// Starts the loops of what a chain holds: stores in the store runner (shut down after
    /// the loops that write to them), everything else in the background runner.
    private func adopt(_ carried: CarriedState) {
        let all = carried.all
        storeRunner.adopt(all.filter { $0 is RunningStore })
        background.adopt(all.filter { !($0 is RunningStore) })
    }

    /// Stops and closes objects no chain holds any more.
    private func release(_ items: [any Sendable]) async {
        for item in items {
            if let store = item as? RunningStore {
                storeRunner.release(store)
            } else if let service = item as? any CarriedService {
                background.release(service)
            } else {
                await (item as? any CarriedResource)?.close()
            }
        }
    }

    /// Re-reads the configuration and swaps the chain atomically. On any problem the old
    /// chain keeps serving and the problems are returned (and logged). Reloads run one at a
    /// time, in the order they were asked for. It re-reads the environment serving: after a
    /// switch, the one switched to.
    @discardableResult
    public func reload() async -> Result<ChainGeneration, ConfigError> {
        await reloads.run { await self.loadNow(switchingTo: nil).map(\.generation) }
    }

    /// What ``loadNow(switchingTo:)`` swapped in, and what it could not apply.
    struct Loaded: Sendable {
        let generation: ChainGeneration
        /// What changes on restart only (listen addresses, limits), said in the log too.
        let warnings: [String]
    }

    /// Builds a chain of the environment serving (a reload), or of environment `target` (a
    /// switch), and swaps it in; the caller holds the turn of ``reloads``. A switch that
    /// fails leaves the reload status (`/-/health`, the reload gauges) as it was: the file
    /// of the environment serving was not what failed.
    func loadNow(switchingTo target: String?) async -> Result<Loaded, ConfigError> {
        guard let chain = active.withLock({ $0 }) else {
            return .failure(ConfigError([ConfigDiagnostic(mark: nil, path: "", message: "not serving yet: nothing to reload")]))
        }
        let old = chain.generation
        let environment = target ?? old.spec.name
        notifier.reloading()
        do throws(ConfigError) {
            let (spec, warnings) = try Self.onListeners(
                of: old.spec, try configuration.loadSpec(environment: environment) { names in environmentNames.withLock { $0 = names } },
                action: target == nil ? "reload" : "a switch")
            let carried = old.carried.next()
            let context = context(spec: spec, carried: carried)
            let built: BuiltChain
            do {
                built = try await ChainBuilder.build(spec, context: context)
            } catch {
                // What this build opened afresh (a store) nobody will hold.
                await release(carried.fresh())
                throw error
            }
            let next = ChainGeneration(chain: built, spec: spec, loadedAt: configuration.clock.now(), number: old.number + 1,
                                       carried: carried, adminRoutes: context.admin)
            adopt(carried)
            _ = chain.swap(to: next)
            // Only now may the build's changes to state the old chain shares take effect.
            await carried.commit()
            // No new request enters the old generation: it drains as its last ones finish.
            old.serving.retire()
            reloadStatus.set(nil)
            noteLoad(succeeded: true)
            if spec.name != old.spec.name { switched(from: old.spec, to: spec) }
            notifier.ready(status: Self.statusLine(next))
            for warning in warnings { logger.warning("\(warning)") }
            var metadata: Logger.Metadata = [
                "environment": .string(spec.name), "generation": .stringConvertible(next.number),
                "carried_over": .string(carried.keys.map(\.description).joined(separator: ",")),
            ]
            if target != nil { metadata["previous"] = .string(old.spec.name) }
            logger.info(target == nil ? "configuration reloaded" : "environment switched", metadata: metadata)
            let released = carried.released()
            if !released.isEmpty {
                // Close what the new chain no longer uses once the old chain's last request
                // has left it (its lease ended).
                background.whenDrained(old.serving) { [self] in
                    await release(released)
                    logger.debug("released \(released.count) object(s) of chain generation \(old.number)")
                }
            }
            return .success(Loaded(generation: next, warnings: warnings))
        } catch {
            let problems = "\(error.diagnostics.count) problem\(error.diagnostics.count == 1 ? "" : "s"): \(error.diagnostics.first.map(\.description) ?? "")"
            for diagnostic in error.diagnostics { logger.error("\(diagnostic)") }
            if let target {
                logger.error("switch to environment \(target) failed; \(old.spec.name) keeps serving",
                             metadata: ["problems": .stringConvertible(error.diagnostics.count)])
                notifier.ready(status: "switch to \(target) failed (\(problems)); " + Self.statusLine(old))
            } else {
                reloadStatus.set("\(error.diagnostics.count) problem(s): " + error.diagnostics.map(\.description).joined(separator: "; "))
                noteLoad(succeeded: false)
                logger.error("reload failed; the previous configuration keeps serving", metadata: ["problems": .stringConvertible(error.diagnostics.count)])
                notifier.ready(status: "reload failed (\(problems)); " + Self.statusLine(old))
            }
            return .failure(error)
        }
    }

    /// `spec` as it serves on the listeners opened for `old`, and what it cannot change
    /// (`action` says on what: "reload", "a switch"). The listeners stay where they are: the
    /// chain checks Host and Origin, and says where it serves, by where they listen, which
    /// must suit its `allowed_hosts` as at start.
    static func onListeners(of old: EnvironmentSpec, _ loaded: EnvironmentSpec, action: String) throws(ConfigError) -> (EnvironmentSpec, [String]) {
        var spec = loaded
        var warnings: [String] = []
        if spec.listen != old.listen || spec.adminListen != old.adminListen {
            warnings.append("listen addresses cannot change on \(action) (still \(old.listen)); restart to move them")
            (spec.listen, spec.adminListen) = (old.listen, old.adminListen)
            let problems = spec.listenProblems
            if !problems.isEmpty {
                throw ConfigError(problems.map {
                    ConfigDiagnostic(mark: nil, path: "environments.\(spec.name).allowed_hosts", message: "the listeners stay until a restart: " + $0)
                })
            }
        }
        let (limits, oldLimits) = (connectionLimits(spec), connectionLimits(old))
        for (name, changed) in [
            ("limits.request_headers", limits.requestHeaders != oldLimits.requestHeaders),
            ("limits.header_timeout", limits.headerTimeout != oldLimits.headerTimeout),
            ("limits.body_timeout", limits.bodyTimeout != oldLimits.bodyTimeout),
            ("limits.output_buffer", limits.outputBuffer != oldLimits.outputBuffer),
            ("limits.pipeline_depth", limits.pipelineDepth != oldLimits.pipelineDepth),
            ("limits.connections", limits.connections != oldLimits.connections),
            ("idle_timeout", limits.idleTimeout != oldLimits.idleTimeout),
        ] where changed {
            warnings.append("\(name) changes on restart only")
        }
        if spec.accessLog != old.accessLog {
            warnings.append("access_log changes on restart only (still \(old.accessLog?.description ?? "off"))")
        }
        return (spec, warnings)
    }

    /// The reload gauges, as Prometheus names its own: whether the last load succeeded, and when one last did.
    private func noteLoad(succeeded: Bool) {
        reloadSuccessful.set(to: succeeded ? 1 : 0)
        if succeeded { reloadSuccessTime.set(to: configuration.clock.now().timeIntervalSince1970) }
    }

    /// `serving production: latency_log -> cache -> upstream (generation 2)`.
    static func statusLine(_ generation: ChainGeneration) -> String {
        let names = generation.spec.chain.map(\.name) + [generation.spec.origin.name]
        return "serving \(generation.spec.name) on \(generation.spec.listen): \(names.joined(separator: " -> ")) (generation \(generation.number))"
    }

    func releaseAll() async {
        guard let generation = active.withLock({ $0?.generation }) else { return }
        // Background services (and running stores) were closed by their runners; close the
        // rest (stores last).
        let resources = generation.carried.all.filter { !($0 is any CarriedService) }.compactMap { $0 as? any CarriedResource }
        for resource in resources where !(resource is CarriedStore) { await resource.close() }
        for resource in resources where resource is CarriedStore { await resource.close() }
    }
}

/// Calls `onReady` once every listener is bound.
actor Readiness {
    let expected: Int
    let onReady: @Sendable (ReadyInfo) async -> Void
    var main: Int?
    var admin: Int?

    init(expected: Int, onReady: @escaping @Sendable (ReadyInfo) async -> Void) {
        self.expected = expected
        self.onReady = onReady
    }

    func bound(main port: Int) async {
        main = port
        await fireIfReady()
    }

    func bound(admin port: Int) async {
        admin = port
        await fireIfReady()
    }

    func fireIfReady() async {
        guard let main, (expected == 1 || admin != nil) else { return }
        await onReady(ReadyInfo(port: main, adminPort: admin))
    }
}

/// Shuts the HTTP clients down after the listeners have drained.
struct TransportShutdown: Service, CustomStringConvertible {
    let transports: StandardTransportProvider
    var description: String { "the HTTP clients to upstreams and token endpoints (shut down after the listeners)" }
    func run() async throws {
        try? await gracefulShutdown()
        await transports.shutdown()
    }
}

/// Graceful shutdown, once the listeners have closed their connections: waits for the
/// requests still inside the chain (a client that left does not stop its request) before
/// the background loops, the stores and the HTTP clients close under them. The group's
/// `drain_timeout` bounds the wait.
struct DrainOnShutdown: Service, CustomStringConvertible {
    let instance: VeneerInstance
    var description: String { "the wait for requests inside the chain at shutdown (at most drain_timeout)" }

    func run() async throws {
        guard (try? await gracefulShutdown()) != nil, let chain = instance.activeChain else { return }
        let generation = chain.generation.serving
        generation.retire()
        if !generation.isDrained {
            instance.logger.debug("waiting for \(generation.requestsInFlight) request(s) inside the chain")
        }
        await generation.drained()
    }
}

/// Runs the access log's writer until shutdown. ``VeneerInstance/run()`` closes it (writing
/// what is queued) once every service has ended: the listeners write their last lines while
/// they drain, and when `drain_timeout` runs out (then every service is cancelled at once, and
/// the requests cut are logged as their connections close).
struct AccessLogService: Service, CustomStringConvertible {
    let log: AccessLog?
    var description: String {
        switch log?.output {
        case .file(let path)?: return "the access log writer (\(path))"
        case .standardOutput?: return "the access log writer (stdout)"
        case nil: return "the access log (off)"
        }
    }

    func run() async throws {
        // Runs until shutdown even without a log: a service that returns ends the group.
        log?.start()
        try? await gracefulShutdown()
    }
}

/// SIGHUP: reload the configuration.
struct ReloadOnHangup: Service, CustomStringConvertible {
    let instance: VeneerInstance
    var description: String { "SIGHUP: reload the configuration (and reopen the access log)" }
    func run() async throws {
        let signals = await UnixSignalsSequence(trapping: .sighup)
        for await _ in signals.cancelOnGracefulShutdown() {
            // Log rotation moved the file (logrotate's postrotate sends SIGHUP): whatever the
            // reload makes of the configuration, the access log goes to a new file.
            instance.accessLog?.reopen()
            await instance.reload()
        }
    }
}

/// `STATE_DIR/run/ENV.admin`: the address the admin API of a running instance listens on.
public struct AdminAddressFile: Sendable {
    /// The file.
    public let path: String

    /// The file of `environment`.
    public init(stateDirectory: String, environment: String) {
        path = stateDirectory + "/run/" + environment + ".admin"
    }

    func write(_ address: ListenAddress) throws {
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try (address.description + "\n").write(toFile: path, atomically: true, encoding: .utf8)
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }

    /// The recorded address, if an instance recorded one.
    public func read() -> ListenAddress? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        return ListenAddress(text.trimmingCharacters(in: .whitespacesAndNewlines))
    }
}
