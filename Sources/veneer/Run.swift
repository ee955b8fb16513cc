import ArgumentParser
import Foundation
import Logging
import ServiceLifecycle
import UnixSignals
import VeneerConfig
import VeneerCore
import VeneerRuntime

struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve the posts API of an environment until SIGTERM or SIGINT; SIGHUP reloads the configuration.")

    @OptionGroup var options: ConfigOptions

    @Option(help: "Listen on this address instead of the environment's (e.g. 127.0.0.1:9000; port 0 picks a free port).")
    var listen: String?

    @Option(help: "Event-loop threads, 1 to 1024 (else $VENEER_THREADS, else one per core).")
    var threads: String?

    /// Event-loop threads: each is a thread with its own stack, and no machine Veneer serves
    /// from has a use for more than 1024.
    static let threadBounds = Bounded<Counts>(1...1024)

    /// The event-loop threads asked for by `--threads` or `VENEER_THREADS`, if any.
    func eventLoopThreads(variables: [String: String]) throws -> Int? {
        let (source, text): (String, String?) = if let threads { ("--threads", threads) } else { ("VENEER_THREADS", variables["VENEER_THREADS"]) }
        guard let text else { return nil }
        guard let threads = Self.threadBounds.value(text) else {
            throw ValidationError("\(source): '\(text)' is not a number of threads from 1 to 1024")
        }
        return threads
    }

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical (else $VENEER_LOG_LEVEL, else info).")
    var logLevel: String?

    @Option(help: "Log line format on stderr: text or json (else $VENEER_LOG_FORMAT, else text).")
    var logFormat: String?

    func run() async throws {
        let levelText = logLevel ?? ProcessInfo.processInfo.environment["VENEER_LOG_LEVEL"] ?? "info"
        guard let level = Logger.Level(rawValue: levelText) else {
            throw ValidationError("unknown log level '\(levelText)'")
        }
        let formatText = logFormat ?? ProcessInfo.processInfo.environment["VENEER_LOG_FORMAT"] ?? "text"
        guard let format = LogFormat(rawValue: formatText) else {
            throw ValidationError("unknown log format '\(formatText)' (text or json)")
        }
        // Under systemd, lines carry their syslog priority for journald (journalctl -p err).
        let journal = DaemonLogHandler.standardErrorIsJournal(variables: ProcessInfo.processInfo.environment)
        LoggingSystem.bootstrap { label in
            var handler = DaemonLogHandler(label: label, format: format, journal: journal)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "veneer.runtime")
        let explicit = options.config
        let variables = options.variables
        // Resolve the file once: a reload re-reads the same file.
        let firstSource: ConfigSource
        do {
            firstSource = try options.source()
        } catch {
            throw failWithConfigError(error)
        }
        let path = firstSource.file
        let builtIn = path == "<built-in>"
        var listenOverride: ListenAddress?
        if let listen {
            guard let address = ListenAddress(listen) else { throw ValidationError("--listen: '\(listen)' is not host:port") }
            listenOverride = address
        }
        var configuration = InstanceConfiguration(
            readSource: { () throws(ConfigError) -> ConfigSource in
                builtIn ? ConfigSource(file: path, text: ConfigLocator.builtInText) : try ConfigSource.read(explicit ?? path)
            },
            environment: options.environmentName,
            variables: variables,
            logger: logger)
        configuration.listenOverride = listenOverride
        let instance: VeneerInstance
        do {
            instance = try await VeneerInstance(configuration: configuration, onReady: { info in
                logger.info("veneer ready", metadata: ["port": .stringConvertible(info.port)])
            })
        } catch {
            throw failWithConfigError(error, context: "veneer: cannot start environment '\(options.environmentName)' from \(path)")
        }
        let group = ServiceGroup(configuration: .init(
            services: [instance], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        do {
            try await group.run()
        } catch let error as ConfigError {
            // Found while building the first chain (an unreadable secret, a bad store URL).
            throw failWithConfigError(error, context: "veneer: cannot start environment '\(options.environmentName)' from \(path)")
        } catch let error as ListenError {
            var stderr = StandardError()
            print("veneer: \(error)", to: &stderr)
            throw ExitCode(exitUnavailable)
        }
    }
}
