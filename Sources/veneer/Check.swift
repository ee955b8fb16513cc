import ArgumentParser
import Foundation
import VeneerConfig
import VeneerRuntime

struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check the configuration: every problem with its file, line, column and key path. Exits 78 on errors.")

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
        if all {
            let problems = document.checkAll(registry: .standard, variables: options.variables, workingDirectory: cwd)
            guard problems.isEmpty else { throw failWithConfigError(ConfigError(problems)) }
            for name in document.environmentNames {
                if let spec = try? document.environment(name, registry: .standard, variables: options.variables, workingDirectory: cwd) {
                    printWarnings(spec)
                }
            }
            print("\(source.file): OK (\(document.environmentNames.count) environments: \(document.environmentNames.joined(separator: ", ")))")
            return
        }
        let name = options.environmentName
        do {
            let spec = try document.environment(name, registry: .standard, variables: options.variables, workingDirectory: cwd)
            printWarnings(spec)
            print("\(source.file): environment \(name) OK (\(spec.chain.map(\.name).joined(separator: " -> "))\(spec.chain.isEmpty ? "" : " -> ")\(spec.origin.name))")
        } catch {
            throw failWithConfigError(error)
        }
    }

    /// Warnings leave the exit status alone: the file is valid, the machine may not be ready.
    func printWarnings(_ spec: EnvironmentSpec) {
        var stderr = StandardError()
        for decorator in spec.chain {
            for warning in decorator.factory.warnings(options: decorator.options, environment: spec) {
                print("warning: environments.\(spec.name).chain[\(decorator.site.index)].\(decorator.name): \(warning)", to: &stderr)
            }
        }
    }
}
