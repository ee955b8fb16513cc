import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
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

        let admin = AdminAddressFile(stateDirectory: spec.stateDirectory, environment: spec.name).read() ?? spec.adminListen ?? spec.listen
        let host = admin.host == "0.0.0.0" ? "127.0.0.1" : (admin.host == "::" ? "::1" : admin.host)
        let address = host.contains(":") ? "[\(host)]:\(admin.port)" : "\(host):\(admin.port)"
        var configuration = HTTPClient.Configuration()
        configuration.timeout = .init(connect: .seconds(1), read: .seconds(10))
        let client = HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: configuration)
        defer { _ = client.shutdown() }
        let encoded = account.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(.init(charactersIn: "-._~"))) ?? account
        // Whatever answers there must be the instance of this file and environment (a
        // `make run` dev proxy on the same address is not): else the store is the truth.
        var elsewhere: String?
        switch await identity(at: address, client: client) {
        case (let environment, let path)? where environment == spec.name && path == ConfigIdentity.canonicalPath(spec.configFile):
            var request = HTTPClientRequest(url: "http://\(address)/-/blocks/\(encoded)")
            request.method = .DELETE
            do {
                let response = try await client.execute(request, timeout: .seconds(10))
                _ = try? await response.body.collect(upTo: 1 << 16)
                switch response.status.code {
                case 200: return .unblocked(via: "the running instance at \(address)")
                case 404: return .notBlocked
                default: break  // refused: fall back to the store
                }
            } catch {
                // Gone meanwhile: the store.
            }
        case (let environment, let path)?:
            elsewhere = "the Veneer at \(address) serves \(path) (\(environment)), not this configuration"
            logger.warning("\(elsewhere!); acting on the store")
        case nil:
            break  // Nobody (or no Veneer) listens: no instance runs for this environment.
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
            return .notRunning("\(elsewhere ?? "no Veneer answers at \(address)"), and environment \(spec.name) keeps its blocks in memory: "
                + "they end with its process")
        }
        return lifted ? .unblocked(via: "the store") : .notBlocked
    }

    /// The environment and canonical configuration path of the Veneer answering at
    /// `address` (its `/-/health`), or nil when none answers.
    static func identity(at address: String, client: HTTPClient) async -> (environment: String, configPath: String)? {
        do {
            let response = try await client.execute(HTTPClientRequest(url: "http://\(address)/-/health"), timeout: .seconds(10))
            let body = try await response.body.collect(upTo: 1 << 16)
            guard let health = try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any],
                  let environment = health["environment"] as? String else { return nil }
            // An instance from before config_path was reported: its word cannot be checked.
            return (environment, health["config_path"] as? String ?? "(unknown)")
        } catch {
            return nil
        }
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
