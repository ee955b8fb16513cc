import ArgumentParser
import Foundation
import VeneerConfig
import VeneerRuntime

struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check the configuration: every problem as FILE:LINE:COL: error: key.path: message. Exits 78 on errors (warnings alone exit 0).")

    @OptionGroup var options: ConfigOptions

    @Flag(help: "Check every environment (and every store), not only the selected one.")
    var all = false

    func run() throws {
        let document: ConfigDocument
        let source: ConfigSource
        do {
            source = try options.source()
            document = try ConfigDocument(source: source)
        } catch {
            throw failWithConfigError(error)
        }
        let cwd = FileManager.default.currentDirectoryPath
        let check = document.check(only: all ? nil : options.environmentName, registry: .standard, variables: options.variables,
                                   workingDirectory: cwd)
        guard check.errors.isEmpty else { throw failWithConfigError(ConfigError(check.errors), warnings: check.warnings) }
        if !check.warnings.isEmpty {
            var stderr = StandardError()
            printDiagnostics(check.warnings, to: &stderr)
        }
        if all {
            print("\(source.file): OK (\(document.environmentNames.count) environments: \(document.environmentNames.joined(separator: ", ")))")
        } else if let spec = check.environments.first {
            print("\(source.file): environment \(spec.name) OK (\(spec.chain.map(\.name).joined(separator: " -> "))\(spec.chain.isEmpty ? "" : " -> ")\(spec.origin.name))")
        }
    }
}
