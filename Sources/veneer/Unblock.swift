import ArgumentParser
import Foundation
import Logging
import VeneerConfig
import VeneerRuntime

struct Unblock: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Lift a block that block_list learned from the upstream (through the running instance, or in its store).")

    @Argument(help: "The account (the value of the learn.account_header, or 'veneer' for Veneer's own credentials).")
    var account: String

    @OptionGroup var options: ConfigOptions

    func run() async throws {
        let spec: EnvironmentSpec
        do {
            let document = try ConfigDocument(source: try options.source())
            spec = try document.environment(options.environmentName, registry: .standard, variables: options.variables,
                                            workingDirectory: FileManager.default.currentDirectoryPath)
        } catch {
            throw failWithConfigError(error)
        }
        var logger = Logger(label: "veneer.unblock")
        logger.logLevel = .warning
        var stderr = StandardError()
        switch try await BlockAdministration.unblock(account, spec: spec, logger: logger) {
        case .unblocked(let via):
            print("unblocked \(account) (\(via))")
        case .notBlocked:
            print("\(account) is not blocked in environment \(spec.name)", to: &stderr)
            throw ExitCode(1)
        case .noBlockList:
            print("environment \(spec.name) has no block_list", to: &stderr)
            throw ExitCode(1)
        case .notRunning(let why):
            print("nothing to unblock: \(why)", to: &stderr)
            throw ExitCode(1)
        }
    }
}
