import ArgumentParser
import Foundation
import Logging
import VeneerConfig
import VeneerCore
import VeneerRuntime

/// `veneer`: the command line. Each subcommand lives in its own file.
struct VeneerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "veneer",
        abstract: "A local forwarding proxy that puts behaviours (cache, auth refresh, block list, latency log) in front of a REST API.",
        discussion: "Veneer is free software, licensed under the Apache License, Version 2.0 (\(VeneerVersion.license)): see the LICENSE file, or /usr/share/doc/veneer/copyright where it was installed as a package.",
        // What `veneer version` prints too, in the same words: the version, then the license.
        version: VeneerVersion.banner,
        // Those the decorators add (veneer purge, veneer unblock) in name order among the others.
        subcommands: [Run.self, Check.self, Chain.self, Decorators.self]
            + ([Reload.self, Switch.self] + OfferedCommands.types).sorted { $0._commandName < $1._commandName } + [Version.self],
        defaultSubcommand: nil
    )
}

/// The exit status for configuration errors (sysexits.h EX_CONFIG); systemd's
/// `RestartPreventExitStatus=78` stops a restart loop on it.
let exitConfigError: Int32 = 78

/// Options shared by the commands that read the configuration.
struct ConfigOptions: ParsableArguments {
    @Option(name: .long, help: "The configuration file (else $VENEER_CONFIG, config/veneer.yaml, /etc/veneer/veneer.yaml, the built-in default).")
    var config: String?

    @Option(name: [.customShort("e"), .long], help: "The environment (else $VENEER_ENV, else development).")
    var environment: String?

    var variables: [String: String] { ProcessInfo.processInfo.environment }

    func source() throws(ConfigError) -> ConfigSource {
        try ConfigLocator.source(explicit: config, variables: variables)
    }

    var environmentName: String { ConfigLocator.environment(explicit: environment, variables: variables) }

    /// Finds the running instance of `environment` of `document`'s file, as every command finds
    /// it (``InstanceAdmin/locate(configFile:environment:stateDirectory:configured:)``): an
    /// environment that does not decode is looked for at the address its instance recorded
    /// under the file's state_dir alone.
    func locate(_ document: ConfigDocument, environment: String) async -> InstanceAdmin.Located {
        let workingDirectory = FileManager.default.currentDirectoryPath
        if let spec = try? document.environment(environment, registry: .standard, variables: variables, workingDirectory: workingDirectory) {
            return await InstanceAdmin.locate(spec)
        }
        return await InstanceAdmin.locate(configFile: document.source.file, environment: environment,
                                          stateDirectory: document.stateDirectory(variables: variables, workingDirectory: workingDirectory),
                                          configured: nil)
    }

    /// The selected environment, decoded; on any problem, prints them and exits 78.
    func spec() throws -> EnvironmentSpec {
        do {
            return try ConfigDocument(source: try source()).environment(
                environmentName, registry: .standard, variables: variables, workingDirectory: FileManager.default.currentDirectoryPath)
        } catch {
            throw failWithConfigError(error)
        }
    }
}

/// Prints configuration problems (and `warnings`) to stderr, one `FILE:LINE:COL: error: key.path:
/// message` line each, and exits 78.
func failWithConfigError(_ error: ConfigError, warnings: [ConfigDiagnostic] = [], context: String? = nil) -> ExitCode {
    var stderr = StandardError()
    // Under the journal, at error priority like the daemon's log lines (journalctl -p err).
    let priority = DaemonLogHandler.standardErrorIsJournal(variables: ProcessInfo.processInfo.environment) ? "<3>" : ""
    if let context { print(priority + context, to: &stderr) }
    printDiagnostics(error.diagnostics + warnings, to: &stderr, priority: priority)
    return ExitCode(exitConfigError)
}

/// Prints `diagnostics` in file order, then how many errors and warnings there were.
/// `priority`: the syslog priority prefix under the journal (`<3>`), else "".
func printDiagnostics(_ diagnostics: [ConfigDiagnostic], to stream: inout StandardError, priority: String = "") {
    for diagnostic in DiagnosticSink.fileOrder(diagnostics) { print(priority + diagnostic.report(), to: &stream) }
    let errors = diagnostics.filter { $0.severity == .error }.count
    let warnings = diagnostics.count - errors
    var counts: [String] = []
    if errors > 0 { counts.append("\(errors) configuration error\(errors == 1 ? "" : "s")") }
    if warnings > 0 { counts.append("\(warnings) warning\(warnings == 1 ? "" : "s")") }
    if !counts.isEmpty { print(priority + counts.joined(separator: ", "), to: &stream) }
}

struct StandardError: TextOutputStream {
    mutating func write(_ string: String) {
        FileHandle.standardError.write(Data(string.utf8))
    }
}

struct Version: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print the version (as --version does).")

    func run() {
        print(VeneerVersion.banner)
    }
}
