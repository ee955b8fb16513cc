import Foundation
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization
import VeneerConfig
import VeneerCore
import VeneerRuntime

/// A Veneer instance running in-process for a test, on a free port.
public struct RunningVeneer: Sendable {
    /// The instance.
    public let instance: VeneerInstance
    /// Its posts API port.
    public let port: Int
    /// Its admin port, when separate.
    public let adminPort: Int?
    /// Its chain (a reload or a switch swaps the generation).
    public let chain: ActiveChain

    /// What a request's `Host` says to reach it.
    public var host: String { "127.0.0.1:\(port)" }

    /// Sends a request to it.
    public func request(_ method: String = "GET", _ target: String, headers: [(String, String)] = [], body: String? = nil) async throws -> RawResponse {
        try await RawHTTP.request(port: port, method, target, headers: headers, body: body)
    }
}

/// A logger that stays quiet unless a test asks otherwise.
public func quietLogger(_ label: String = "veneer.test") -> Logger {
    var logger = Logger(label: label)
    logger.logLevel = .critical
    return logger
}

/// Starts Veneer from YAML text (listening on a free port), runs `body`, then shuts it
/// down gracefully and waits for it to stop.
public func withVeneer<T>(
    yaml: String,
    environment: String = "development",
    variables: [String: String] = [:],
    registry: Registry = .standard,
    clock: any VeneerClock = SystemClock(),
    workingDirectory: String = FileManager.default.currentDirectoryPath,
    yamlProvider: (@Sendable () -> String)? = nil,
    eventLoopGroup: (any EventLoopGroup)? = nil,
    _ body: (RunningVeneer) async throws -> T
) async throws -> T {
    let fixed = yaml
    // A state folder of its own unless the test names one (state_dir, STATE_DIRECTORY): the
    // default, .veneer in the working directory, would be shared by every instance of the run
    // (the address record each writes and removes) and written into the checkout.
    var variables = variables
    let ownState = variables["STATE_DIRECTORY"] == nil ? try temporaryDirectory("veneer-state") : nil
    defer { if let ownState { try? FileManager.default.removeItem(atPath: ownState) } }
    if let ownState { variables["STATE_DIRECTORY"] = ownState }
    var configuration = InstanceConfiguration(
        readSource: { () throws(ConfigError) -> ConfigSource in ConfigSource(file: "test.yaml", text: yamlProvider?() ?? fixed) },
        environment: environment, variables: variables, workingDirectory: workingDirectory,
        registry: registry, clock: clock, logger: quietLogger())
    configuration.listenOverride = ListenAddress(host: "127.0.0.1", port: 0)
    if let eventLoopGroup { configuration.eventLoopGroup = eventLoopGroup }
    let (stream, continuation) = AsyncStream<ReadyInfo>.makeStream()
    let instance = try await VeneerInstance(configuration: configuration, onReady: { continuation.yield($0) })
    let group = ServiceGroup(configuration: .init(services: [instance], logger: quietLogger()))
    // Ends the stream when the group stops, so that a failed start (a port in use, say)
    // is thrown here instead of waiting forever for a readiness that never comes.
    let task = Task {
        defer { continuation.finish() }
        try await group.run()
    }
    var iterator = stream.makeAsyncIterator()
    guard let ready = await iterator.next() else {
        try await task.value
        throw HarnessError.stoppedBeforeReady
    }
    let running = RunningVeneer(instance: instance, port: ready.port, adminPort: ready.adminPort, chain: ready.chain)
    do {
        let result = try await body(running)
        await group.triggerGracefulShutdown()
        try await task.value
        return result
    } catch {
        await group.triggerGracefulShutdown()
        _ = try? await task.value
        throw error
    }
}

/// Why ``withVeneer(yaml:environment:variables:registry:clock:workingDirectory:yamlProvider:_:)`` failed.
public enum HarnessError: Error {
    /// The instance stopped without an error before it was listening.
    case stoppedBeforeReady
}

/// Runs `services` (a store with connections of its own) while `body` runs, then cancels
/// them and waits for them to end.
public func whileRunning<T>(_ services: [any Service], _ body: () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: Void.self) { group in
        for service in services {
            group.addTask { try await service.run() }
        }
        defer { group.cancelAll() }
        return try await body()
    }
}
