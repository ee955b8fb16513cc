import ArgumentParser
import Foundation
import VeneerConfig
import VeneerRuntime

struct Switch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Switch the running instance to another environment of its configuration file, without a restart.",
        discussion: """
            Finds the instance serving the environment -e names of this configuration file (as veneer reload finds \
            it: never another file's instance on the same port) and asks it to serve \
            ENVIRONMENT from now on: a reload with another environment, on the same listen address (the new \
            environment's listen and admin addresses are not applied: a warning says so), requests in flight \
            finishing on the old chain. Exit status: 0 switched (or ENVIRONMENT already served); 78 ENVIRONMENT has \
            errors (each printed; nothing changed), whether this command finds them or the instance does; 69 no \
            instance of the -e environment answers; 1 the instance runs under systemd, where the unit's name is the \
            environment (systemctl start veneer@ENVIRONMENT instead).
            """)

    @Argument(help: "The environment to serve from now on.")
    var target: String

    @OptionGroup var options: ConfigOptions

    func run() async throws {
        let serving = options.environmentName
        let workingDirectory = FileManager.default.currentDirectoryPath
        let source: ConfigSource
        let document: ConfigDocument
        do {
            source = try options.source()
            document = try ConfigDocument(source: source)
        } catch {
            throw failWithConfigError(error)
        }
        // The instance of `serving`, as `veneer reload` finds it (that environment of this file);
        // one that no longer decodes is found by the address file its instance recorded.
        let instance = await options.locate(document, environment: serving)
        do {
            // The environment the instance will read: its errors are found here, without asking it.
            _ = try document.environment(target, registry: .standard, variables: options.variables, workingDirectory: workingDirectory)
        } catch {
            // Say what runs only when it does.
            let keeps = if case .found = instance { "; the running instance keeps serving \(serving)" } else { "" }
            throw failWithConfigError(error, context: "veneer switch: not switched: environment \(target) of \(source.file) has errors\(keeps)")
        }
        var stderr = StandardError()
        guard case .found(let address) = instance else {
            print("veneer switch: \(InstanceAdmin.notFound(instance, environment: serving, configFile: source.file)) "
                  + "(-e names the environment the instance serves now)", to: &stderr)
            throw ExitCode(exitUnavailable)
        }
        switch await InstanceAdmin.switchEnvironment(at: address, serving: serving, to: target) {
        case .switched(let generation, let warnings):
            for warning in warnings { print("warning: \(warning)", to: &stderr) }
            print("switched to environment \(target) (was \(serving); chain generation \(generation))")
        case .unchanged(let generation):
            print("environment \(target) already serves (chain generation \(generation)); nothing was rebuilt")
        case .refused(let errors):
            for line in errors { print(line, to: &stderr) }
            print("switch to environment \(target) failed (\(errors.count) configuration error\(errors.count == 1 ? "" : "s")); \(serving) keeps serving",
                  to: &stderr)
            throw ExitCode(exitConfigError)
        case .managedBySystemd(let message):
            print("veneer switch: \(message)", to: &stderr)
            throw ExitCode(1)
        case .unavailable(let why):
            print("veneer switch: \(why)", to: &stderr)
            throw ExitCode(exitUnavailable)
        }
    }
}
