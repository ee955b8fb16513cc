import ArgumentParser
import Foundation
import VeneerConfig
import VeneerRuntime

/// The exit status when no instance answers (sysexits.h EX_UNAVAILABLE).
let exitUnavailable: Int32 = 69

struct Reload: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Reload the configuration of the running instance (as SIGHUP does) and print the outcome.",
        discussion: """
            Finds the instance of the environment through the admin address it recorded under its state_dir (else \
            the configured one), checks that it serves that environment of this configuration file (never another \
            file's instance on the same port), asks it to re-read its configuration file, and waits for the outcome. Exit status: 0 reloaded; 78 the new \
            configuration has errors (printed as FILE:LINE:COL: error: ...; the previous one keeps serving), whether \
            this command finds them (then the instance is not asked) or the instance does; 69 no instance of the \
            environment answers.
            """)

    @OptionGroup var options: ConfigOptions

    func run() async throws {
        let spec: EnvironmentSpec
        let source: ConfigSource
        do {
            source = try options.source()
        } catch {
            throw failWithConfigError(error)
        }
        let document: ConfigDocument
        do {
            document = try ConfigDocument(source: source)
        } catch {
            throw failWithConfigError(error, context: "veneer reload: not reloaded: \(source.file) has errors")
        }
        do {
            // The file the instance will read: its errors are found here, without asking it.
            spec = try document.environment(
                options.environmentName, registry: .standard, variables: options.variables, workingDirectory: FileManager.default.currentDirectoryPath)
        } catch {
            // Say what runs only when it does: an instance of this file and environment.
            let instance = await options.locate(document, environment: options.environmentName)
            let keeps = if case .found = instance { "; the running instance keeps its configuration" } else { "" }
            throw failWithConfigError(error, context: "veneer reload: not reloaded: \(source.file) has errors\(keeps)")
        }
        var stderr = StandardError()
        switch await InstanceAdmin.reload(spec) {
        case .reloaded(let generation):
            print("reloaded environment \(spec.name) (chain generation \(generation))")
        case .refused(let errors):
            for line in errors { print(line, to: &stderr) }
            print("reload of environment \(spec.name) failed (\(errors.count) configuration error\(errors.count == 1 ? "" : "s")); the previous configuration keeps serving",
                  to: &stderr)
            throw ExitCode(exitConfigError)
        case .unavailable(let why):
            print("veneer reload: \(why)", to: &stderr)
            throw ExitCode(exitUnavailable)
        }
    }
}
