import ArgumentParser
import Foundation
import Logging
import VeneerConfig
import VeneerCore
import VeneerRuntime

struct Purge: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Remove cached responses for a path (or all of them), through the running instance or in the cache's store.",
        discussion: """
            PATH is a path of the environment's resources: /posts/1 (every query and every caller's copy of it), \\
            /posts (every list), /posts?userId=1 (that query alone). Exit status: 0 done (also when nothing was \\
            cached); 1 the environment has no cache; 64 a PATH that is not a path of the environment; 78 a \\
            configuration error.
            """)

    @Argument(help: "The path whose cached responses go, e.g. /posts/1.")
    var path: String?

    @Flag(help: "Remove every cached response.")
    var all = false

    @OptionGroup var options: ConfigOptions

    func validate() throws {
        guard (path == nil) != !all else { throw ValidationError("give a PATH or --all (not both)") }
    }

    func run() async throws {
        let spec = try options.spec()
        if let path, !InstanceAdmin.isCachePath(path, of: spec) {
            let known = spec.resources.map { "/\($0.name), /\($0.name)/{id}" }.joined(separator: ", ")
            throw ValidationError("\(path) is not a path of environment \(spec.name) (\(known))")
        }
        var logger = Logger(label: "veneer.purge")
        logger.logLevel = .warning
        var stderr = StandardError()
        let what = path ?? "every cached response"
        switch try await InstanceAdmin.purge(spec, path: path, logger: logger) {
        case .purged(0, let via):
            print("nothing was cached for \(what) (\(via))")
        case .purged(let count, let via):
            print("purged \(what): \(count) stored key\(count == 1 ? "" : "s") (\(via))")
        case .noCache:
            print("environment \(spec.name) has no cache", to: &stderr)
            throw ExitCode(1)
        case .nothingToPurge(let why):
            print("nothing to purge: \(why)")
        }
    }
}
