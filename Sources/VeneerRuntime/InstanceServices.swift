import Foundation
import Logging
import ServiceLifecycle
import UnixSignals
import VeneerOrigins
import VeneerServer

/// What serves: the SIGHUP reloads, the listeners and the STOPPING notice, started only once
/// `prelude` has built the first chain, as Hummingbird's `Application.run` starts its server
/// after its prelude: the group above it is static, and what the build needs (the stores'
/// connections, the background runner) runs already. Its services run as a group of their
/// own, inside the instance's, and go first at shutdown, in reverse: the notice, the
/// listeners (draining their connections), then reloads.
struct ServingGroup: Service, CustomStringConvertible {
    let prelude: @Sendable () async throws -> [any Service]
    let logger: Logger
    var description: String { "the listeners and reloads, started once the first chain is built" }

    func run() async throws {
        let services = try await prelude()
        // Asked to stop while building: nothing to start.
        if Task.isShuttingDownGracefully { return }
        try await ServiceGroup(configuration: .init(services: services, logger: logger)).run()
    }
}

/// Calls `onReady` once every listener is bound.
actor Readiness {
    let expected: Int
    let chain: ActiveChain
    let onReady: @Sendable (ReadyInfo) async -> Void
    /// The ports of the main listeners bound so far, by their place in `listen` (0: a Unix socket).
    var mains: [Int: Int] = [:]
    let mainCount: Int
    var admin: Int?

    init(expected: Int, mainCount: Int = 1, chain: ActiveChain, onReady: @escaping @Sendable (ReadyInfo) async -> Void) {
        self.expected = expected
        self.mainCount = mainCount
        self.chain = chain
        self.onReady = onReady
    }

    /// The main listener at place `index` of `listen` is bound, on `port`.
    func bound(main port: Int, index: Int = 0) async {
        mains[index] = port
        await fireIfReady()
    }

    /// The port announced: the first TCP listener's, 0 when they are all Unix sockets.
    var main: Int? {
        guard mains.count == mainCount else { return nil }
        return (0..<mainCount).lazy.compactMap { self.mains[$0] }.first { $0 != 0 } ?? 0
    }

    func bound(admin port: Int) async {
        admin = port
        await fireIfReady()
    }

    func fireIfReady() async {
        guard let main, (expected == 1 || admin != nil) else { return }
        await onReady(ReadyInfo(port: main, adminPort: admin, chain: chain))
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
/// requests still inside the chain (a client that left does not stop its request), and the
/// background work its handlers started (a cache's refresh), before
/// the background loops, the stores and the HTTP clients close under them. The group's
/// `drain_timeout` bounds the wait.
struct DrainOnShutdown: Service, CustomStringConvertible {
    let instance: VeneerInstance
    var description: String { "the wait for requests inside the chain at shutdown (at most drain_timeout)" }

    func run() async throws {
        guard (try? await gracefulShutdown()) != nil, let generation = instance.chains.serving?.serving else { return }
        generation.retire()
        if !generation.isDrained {
            instance.logger.debug("waiting for \(generation.requestsInFlight) request(s) or background work inside the chain")
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

