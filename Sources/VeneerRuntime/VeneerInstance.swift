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
    /// The chain serving (a reload or a switch swaps its generation).
    public let chain: ActiveChain
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
        for warning in spec.warnings { logger.warning("\(warning.report())") }
        if let listenOverride {
            spec.listen = listenOverride
            if let problem = EnvironmentSpec.listenProblem(listenOverride, allowedHosts: spec.allowedHosts) {
                throw ConfigError([ConfigDiagnostic(mark: nil, path: "--listen", message: problem)])
            }
        }
        return spec
    }
}

/// One running Veneer: its listeners, its chains (``ChainLifecycle``), reload and shutdown. A
/// `Service`: run it in a `ServiceGroup` (the command line does, with SIGTERM/SIGINT as
/// graceful shutdown signals), and it serves until graceful shutdown, draining in-flight requests.
public final class VeneerInstance: Service, Sendable, CustomStringConvertible {
    /// What it was started with.
    public let configuration: InstanceConfiguration
    /// Health reports of the components.
    public let health: HealthBoard
    /// The Prometheus registry behind `/-/metrics` (all but the duration histograms, below).
    public let metrics: PrometheusCollectorRegistry
    /// The duration histograms, written on `/-/metrics` after `metrics`.
    let durationHistograms = DurationHistogramRegistry()
    let transports: StandardTransportProvider
    /// The background loops of carried state, the chains' background work, and the release of
    /// what old chains used.
    let background: BackgroundRunner
    /// The stores with connections of their own (postgres), from the moment they open.
    let storeRunner: BackgroundRunner
    /// The chains: built, adopted, released.
    let chains: ChainLifecycle
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
    /// The span exporter (`telemetry:`), fixed at start like the access log; nil: off.
    let telemetry: OTLPExporter?
    /// The last requests answered, for the status page.
    let feed = RequestFeed()
    /// What is buffered whole across every connection and chain (`limits.buffered`).
    let buffers = BufferBudget(limit: 256 << 20)
    /// `veneer_config_last_reload_successful` and `..._success_timestamp_seconds`.
    let reloadSuccessful: Prometheus.Gauge
    let reloadSuccessTime: Prometheus.Gauge
    /// `veneer_buffered_bytes`, `..._peak_bytes`, `..._limit_bytes` and `veneer_buffered_waiters`, set at scrape time.
    let bufferGauges: [Prometheus.Gauge]
    /// When it was created, for the uptime `/-/health` reports.
    let startedAt: Date
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
        // A descriptor per connection: the soft limit (often 1024) goes up to the hard one (README, Connections).
        if let limit = DescriptorLimit.raiseToHard(), limit.before != limit.hard {
            let metadata: Logger.Metadata = ["soft": .stringConvertible(limit.before), "hard": .stringConvertible(limit.hard)]
            if limit.after == limit.hard {
                configuration.logger.info("descriptor limit raised to the hard limit", metadata: metadata)
            } else {
                configuration.logger.warning("the descriptor limit could not be raised to the hard limit", metadata: metadata)
            }
        }
        var names: [String] = []
        firstSpec = try configuration.loadSpec(environment: configuration.environment) { names = $0 }
        environmentNames = Mutex(names)
        adminAddress = AdminAddressRecord(stateDirectory: firstSpec.stateDirectory, environment: firstSpec.name)
        startedAt = configuration.clock.now()
        metrics = PrometheusCollectorRegistry()
        let factory = DescribedMetricsFactory(registry: metrics, histograms: durationHistograms, registered: configuration.registry)
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
        let registry = metrics
        bufferGauges = ["veneer_buffered_bytes", "veneer_buffered_peak_bytes", "veneer_buffered_limit_bytes", "veneer_buffered_waiters"].map {
            registry.makeGauge(descriptor: DescribedMetricsFactory.descriptor($0))
        }
        environmentInfo = Mutex(nil)
        let health = HealthBoard()
        self.health = health
        let transports = StandardTransportProvider(eventLoopGroup: configuration.eventLoopGroup, metrics: UpstreamMetrics(factory: factory))
        self.transports = transports
        let telemetry = try Self.makeExporter(firstSpec.telemetry, transports: transports, factory: factory, logger: configuration.logger)
        self.telemetry = telemetry
        background = BackgroundRunner(logger: configuration.logger)
        let storeRunner = BackgroundRunner(logger: configuration.logger, description: "the store connections (postgres), closed after the background loops")
        self.storeRunner = storeRunner
        chains = ChainLifecycle(makeContext: { [configuration, buffers, telemetry] spec, carried in
            var context = BuildContext(
                logger: configuration.logger, clock: configuration.clock, metrics: factory, transports: transports,
                stateDirectory: spec.stateDirectory, resources: spec.resources,
                limits: BuildLimits(responseBody: spec.limits.responseBody, bodyTimeout: spec.limits.bodyTimeout), carried: carried, health: health,
                stores: StoreRegistry(specs: spec.stores, carried: carried, health: health, logger: configuration.logger, runner: storeRunner))
            context.passedForwardingHeaders = ForwardingHeaders(passing: spec.passForwardingHeaders).passed
            context.environment = spec.name
            context.requestDirectives = configuration.registry.requestDirectives
            // One budget for the instance, its limit the serving environment's (a reload sets it).
            buffers.resize(to: spec.limits.buffered, wait: spec.limits.bufferedWait, waiters: spec.limits.bufferedWaiters)
            context.buffers = buffers
            context.spans = telemetry
            return context
        }, clock: configuration.clock, background: background, storeRunner: storeRunner, logger: configuration.logger)
    }

    /// The chain serving new requests, once ``run()`` has built the first one (before it listens).
    public var chain: ActiveChain? { chains.chain }

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
        // One static group. What every chain needs starts first and shuts down last, in
        // reverse: the chain drains, background loops end (flushing caches), the stores close,
        // the HTTP clients last. What serves starts once the first chain is built, and goes first.
        var groupConfiguration = ServiceGroupConfiguration(services: [
            AccessLogService(log: accessLog),
            WatchdogService(notifier: notifier, eventLoopGroup: configuration.eventLoopGroup, logger: logger),
            TransportShutdown(transports: transports), TelemetryService(exporter: telemetry), storeRunner, background, DrainOnShutdown(instance: self),
            MemoryTrimService(requestsInFlight: { [chains] in chains.serving?.serving.requestsInFlight }),
            ServingGroup(prelude: { try await self.startServing(spec) }, logger: logger),
        ], logger: logger)
        groupConfiguration.maximumGracefulShutdownDuration = spec.drainTimeout
        groupConfiguration.maximumCancellationDuration = .seconds(5)
        // The file of the environment serving at exit (a switch moves it).
        defer { adminAddress.remove() }
        do {
            try await ServiceGroup(configuration: groupConfiguration).run()
        } catch {
            // What the chains carry (latency_log's queued lines, stores) is released on this
            // way out too.
            await accessLog?.close()
            await chains.releaseAll()
            throw error
        }
        await accessLog?.close()
        await chains.releaseAll()
        logger.info("veneer stopped", metadata: ["environment": .string(servingEnvironment)])
    }

    /// The prelude of what serves: builds and adopts the first chain (its stores' connections
    /// run already; a reload asked for meanwhile waits for it), then gives the services that
    /// serve it. A problem found while building is thrown, and ends the group.
    private func startServing(_ spec: EnvironmentSpec) async throws -> [any Service] {
        let first = await reloads.run { () async -> Result<ActiveChain, ConfigError> in
            do throws(ConfigError) {
                let chain = try await chains.adopt(chains.build(spec)).active
                noteLoad(succeeded: true)
                noteServing(spec.name)
                return .success(chain)
            } catch {
                return .failure(error)
            }
        }
        return serving(try first.get(), spec: spec)
    }

    /// The services that serve `chain`, in the order they start: SIGHUP, the listeners, and
    /// the STOPPING notice (first to go at shutdown).
    private func serving(_ chain: ActiveChain, spec: EnvironmentSpec) -> [any Service] {
        var admin = AdminAPI(chain: chain, health: health, metrics: metrics, reloadStatus: reloadStatus,
                             configPath: ConfigIdentity.canonicalPath(spec.configFile, workingDirectory: configuration.workingDirectory),
                             startedAt: startedAt, clock: configuration.clock, reload: { await self.reload() })
        admin.feed = feed
        admin.durationHistograms = durationHistograms
        admin.switchEnvironment = { await self.switchEnvironment(to: $0) }
        admin.environments = { self.environments }
        admin.switchRefusal = switchRefusal
        admin.refreshGauges = { [buffers, bufferGauges] in
            for (gauge, figure) in zip(bufferGauges, [buffers.inUse, buffers.peak, buffers.limit, buffers.waiters]) {
                gauge.set(to: Double(figure))
            }
        }
        let activation = SocketActivation.from(configuration.variables).assign(listeners: spec.listeners, admin: spec.adminListen)
        let mains = Self.mainEndpoints(spec, activation)
        if !activation.main.isEmpty || activation.admin != nil || !activation.extra.isEmpty {
            logger.info("serving on the sockets systemd passed", metadata: [
                "sockets": .string((activation.main.values.sorted { $0.descriptor < $1.descriptor } + [activation.admin].compactMap { $0 } + activation.extra)
                    .map { $0.address?.description ?? "fd \($0.descriptor)" }.joined(separator: ", ")),
            ])
        }
        let readiness = Readiness(expected: spec.adminListen == nil ? 1 : 2, mainCount: mains.count, chain: chain) { [onReady, logger, notifier, chain, adminAddress] info in
            // Where the admin API really listens (port 0 picks one): `veneer unblock` reads it.
            // (Commands reach it over TCP: an admin API on Unix sockets only is not recorded.)
            let adminTCP = spec.adminListen.map { $0.socketPath == nil ? $0 : nil } ?? spec.listeners.first { $0.socketPath == nil }
            do {
                if let host = adminTCP?.host { try adminAddress.record(ListenAddress(host: host, port: info.adminPort ?? info.port)) }
            } catch {
                logger.debug("could not record the admin address", metadata: ["error": .string(ErrorText.describe(error))])
            }
            // Only now do the listeners accept connections: tell systemd.
            notifier.ready(status: Self.statusLine(chain.generation))
            await onReady(info)
        }
        var services: [any Service] = [ReloadOnHangup(instance: self)]
        for (index, (endpoint, unixSocket)) in mains.enumerated() {
            services.append(Listener.make(
                endpoint,
                edge: ProxyEdge(chain: chain, admin: admin, logger: logger, adminOnly: false, servesAdmin: spec.adminListen == nil,
                                accessLog: accessLog, metrics: edgeMetrics, feed: feed, buffers: buffers, unixSocket: unixSocket,
                                telemetry: telemetry),
                limits: Self.connectionLimits(spec), eventLoopGroup: configuration.eventLoopGroup, logger: logger,
                loopbackIdentity: spec.peerIdentity, onBound: { port in await readiness.bound(main: port, index: index) }))
        }
        if let adminListen = spec.adminListen {
            services.append(Listener.make(
                activation.admin.map { .inherited(descriptor: $0.descriptor, address: adminListen.description) } ?? Self.endpoint(adminListen, spec.socket),
                edge: ProxyEdge(chain: chain, admin: admin, logger: logger, adminOnly: true, servesAdmin: true, accessLog: accessLog,
                            metrics: edgeMetrics, feed: feed, buffers: buffers, unixSocket: adminListen.socketPath != nil),
                limits: Self.connectionLimits(spec), eventLoopGroup: configuration.eventLoopGroup, logger: logger,
                onBound: { port in await readiness.bound(admin: port) }))
        }
        services.append(StoppingNotice(notifier: notifier))
        return services
    }

    /// The main listeners: each of `listen`, on the socket systemd passed for it or bound as
    /// configured, then the passed sockets that match none; with whether each is a Unix socket.
    static func mainEndpoints(_ spec: EnvironmentSpec, _ activation: SocketActivation.Assignment) -> [(Listener.Endpoint, Bool)] {
        let configured = spec.listeners.enumerated().map { index, address -> (Listener.Endpoint, Bool) in
            guard let passed = activation.main[index] else { return (endpoint(address, spec.socket), address.socketPath != nil) }
            return (.inherited(descriptor: passed.descriptor, address: address.description), address.socketPath != nil)
        }
        return configured + activation.extra.map { passed in
            (.inherited(descriptor: passed.descriptor, address: passed.address?.description ?? "fd \(passed.descriptor)"), passed.address?.socketPath != nil)
        }
    }

    /// Where the listener of `address` listens: a Unix socket gets the environment's `socket` options.
    static func endpoint(_ address: ListenAddress, _ socket: SocketOptions) -> Listener.Endpoint {
        guard let path = address.socketPath else { return .tcp(host: address.host, port: address.port) }
        return .unix(path: path, mode: socket.mode, groupID: socket.groupID)
    }
}
