import Foundation
import Logging
import NIOCore
import NIOHTTP1
import VeneerConfig
import VeneerCore
import VeneerDecorators
import VeneerStores

/// `veneer unblock`: lifts a learned block through the running instance's admin API, or,
/// when no instance runs, directly in the block list's store.
public enum BlockAdministration {
    /// What happened.
    public enum Outcome: Sendable, Equatable {
        /// The block was lifted (where: the running instance or the store).
        case unblocked(via: String)
        /// The account was not blocked.
        case notBlocked
        /// The environment has no block_list.
        case noBlockList
        /// Nothing can be done without a running instance (memory store).
        case notRunning(String)
    }

    /// Lifts the block of `account` in environment `spec`.
    public static func unblock(_ account: String, spec: EnvironmentSpec, logger: Logger) async throws -> Outcome {
        let lists = spec.chain.compactMap { $0.options as? BlockListOptions }
        guard !lists.isEmpty else { return .noBlockList }

        // Whatever answers there must be the instance of this file and environment (a
        // `make run` dev proxy on the same address is not): else the store is the truth.
        let located = await InstanceAdmin.locate(spec)
        if case .found(let address) = located {
            let encoded = account.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(.init(charactersIn: "-._~"))) ?? account
            let url = "http://\(address)/-/blocks/\(encoded)?environment=\(InstanceAdmin.queryValue(spec.name))"
            switch await InstanceAdmin.exchange(.DELETE, url, timeout: .seconds(10))?.status {
            case 200: return .unblocked(via: "the running instance at \(address)")
            case 404: return .notBlocked
            default: break  // refused, or gone meanwhile: the store
            }
        } else if case .other = located {
            logger.warning("\(InstanceAdmin.notFound(located, environment: spec.name, configFile: spec.configFile)); acting on the store")
        }

        var lifted = false
        var memoryOnly = true
        for options in lists {
            guard let name = options.store, let storeSpec = spec.stores[name] else { continue }
            memoryOnly = false
            if try await StoreRegistry.withOpened(storeSpec, logger: logger, { try await $0.delete(BlockBook.namespace, account) }) {
                lifted = true
            }
        }
        if memoryOnly {
            return .notRunning("\(InstanceAdmin.notFound(located, environment: spec.name, configFile: spec.configFile)), and environment "
                + "\(spec.name) keeps its blocks in memory: they end with its process")
        }
        return lifted ? .unblocked(via: "the store") : .notBlocked
    }
}

/// Which configuration file an instance serves, as a path two processes agree on.
public enum ConfigIdentity {
    /// The path of the built-in configuration.
    public static let builtIn = "<built-in>"

    /// `file` made absolute against `workingDirectory`, with `.`, `..` and symbolic links
    /// resolved; the built-in configuration as it is.
    public static func canonicalPath(_ file: String, workingDirectory: String = FileManager.default.currentDirectoryPath) -> String {
        guard file != builtIn else { return builtIn }
        let url = file.hasPrefix("/") ? URL(fileURLWithPath: file) : URL(fileURLWithPath: workingDirectory).appendingPathComponent(file)
        return url.standardizedFileURL.resolvingSymlinksInPath().path
    }
}
