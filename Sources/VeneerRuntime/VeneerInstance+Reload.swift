import Foundation
import Logging
import Prometheus
import Synchronization
import VeneerConfig
import VeneerCore
import VeneerServer

/// The reload transaction: read the environment, check what the listeners cannot change,
/// build the chain, adopt it (``ChainLifecycle``), and say what happened.
extension VeneerInstance {
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
        guard let old = chains.serving else {
            return .failure(ConfigError([ConfigDiagnostic(mark: nil, path: "", message: "not serving yet: nothing to reload")]))
        }
        notifier.reloading()
        do throws(ConfigError) {
            let loaded = try configuration.loadSpec(environment: target ?? old.spec.name) { names in environmentNames.withLock { $0 = names } }
            let (spec, warnings) = try Self.onListeners(of: old.spec, loaded, action: target == nil ? "reload" : "a switch")
            let next = try await chains.build(spec)
            await chains.adopt(next)
            noteLoaded(next, replacing: old, switched: target != nil, warnings: warnings)
            return .success(Loaded(generation: next, warnings: warnings))
        } catch {
            noteFailed(error, keeping: old, switchingTo: target)
            return .failure(error)
        }
    }

    /// What a load that swapped `next` in for `old` tells: the reload status and gauges, the
    /// admin address and environment series after a switch, systemd, the log.
    private func noteLoaded(_ next: ChainGeneration, replacing old: ChainGeneration, switched: Bool, warnings: [String]) {
        reloadStatus.set(nil)
        noteLoad(succeeded: true)
        if next.spec.name != old.spec.name { self.switched(from: old.spec, to: next.spec) }
        notifier.ready(status: Self.statusLine(next))
        for warning in warnings { logger.warning("\(warning)") }
        var metadata: Logger.Metadata = [
            "environment": .string(next.spec.name), "generation": .stringConvertible(next.number),
            "carried_over": .string(next.carried.keys.map(\.description).joined(separator: ",")),
        ]
        if switched { metadata["previous"] = .string(old.spec.name) }
        logger.info(switched ? "environment switched" : "configuration reloaded", metadata: metadata)
    }

    /// What a load that failed tells, `old` serving on. A switch that fails leaves the reload
    /// status as it was: the file of the environment serving was not what failed.
    private func noteFailed(_ error: ConfigError, keeping old: ChainGeneration, switchingTo target: String?) {
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
    }

    /// `spec` as it serves on the listeners opened for `old`, and what it cannot change
    /// (`action` says on what: "reload", "a switch"). The listeners stay where they are: the
    /// chain checks Host and Origin, and says where it serves, by where they listen, which
    /// must suit its `allowed_hosts` as at start.
    static func onListeners(of old: EnvironmentSpec, _ loaded: EnvironmentSpec, action: String) throws(ConfigError) -> (EnvironmentSpec, [String]) {
        var spec = loaded
        var warnings: [String] = []
        if spec.listeners != old.listeners || spec.adminListen != old.adminListen || spec.socket != old.socket {
            warnings.append("listen addresses cannot change on \(action) (still \(old.listeners.map(\.description).joined(separator: ", "))); restart to move them")
            (spec.listeners, spec.adminListen, spec.socket) = (old.listeners, old.adminListen, old.socket)
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
    func noteLoad(succeeded: Bool) {
        reloadSuccessful.set(to: succeeded ? 1 : 0)
        if succeeded { reloadSuccessTime.set(to: configuration.clock.now().timeIntervalSince1970) }
    }

    /// `serving production: latency_log -> cache -> upstream (generation 2)`.
    static func statusLine(_ generation: ChainGeneration) -> String {
        let names = generation.spec.chain.map(\.name) + [generation.spec.origin.name]
        return "serving \(generation.spec.name) on \(generation.spec.listen): \(names.joined(separator: " -> ")) (generation \(generation.number))"
    }
}
