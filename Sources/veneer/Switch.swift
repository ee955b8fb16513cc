import ArgumentParser
import Foundation
import VeneerConfig
import VeneerRuntime

struct Switch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Switch the running instance to another environment of its configuration file, without a restart.",
        discussion: """
            Finds the instance serving the environment -e names (as veneer reload finds it) and asks it to serve \
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
        let spec: EnvironmentSpec
        do {
            source = try options.source()
            document = try ConfigDocument(source: source)
        } catch {
            throw failWithConfigError(error)
        }
        do {
            // The environment the instance will read: its errors are found here, without asking it.
            spec = try document.environment(target, registry: .standard, variables: options.variables, workingDirectory: workingDirectory)
        } catch {
            throw failWithConfigError(error, context: "veneer switch: not switched: environment \(target) of \(source.file) has errors; the running instance keeps serving \(serving)")
        }
        var stderr = StandardError()
        // The instance of `serving`, as `veneer reload` finds it; an environment that no longer
        // decodes still has the address file its instance recorded under the same state_dir.
        let servingSpec = try? document.environment(serving, registry: .standard, variables: options.variables, workingDirectory: workingDirectory)
        let address = servingSpec.map(InstanceAdmin.address(of:))
            ?? AdminAddressFile(stateDirectory: spec.stateDirectory, environment: serving).read().map(InstanceAdmin.address)
        guard let address else {
            print("veneer switch: no Veneer serving environment \(serving) recorded its admin address, and \(source.file) does not say where it "
                  + "listens (the environment has errors; -e names the environment the instance serves now)", to: &stderr)
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
