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
        var request = HTTPClientRequest(url: "http://\(address)/-/blocks/\(encoded)")
        request.method = .DELETE
        do {
            let response = try await client.execute(request, timeout: .seconds(10))
            _ = try? await response.body.collect(upTo: 1 << 16)
            switch response.status.code {
            case 200: return .unblocked(via: "the running instance at \(address)")
            case 404: return .notBlocked
            default: break  // something else listens there: fall back to the store
            }
        } catch {
            // Nobody listens: no instance runs for this environment.
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
            return .notRunning("no Veneer answers at \(address), and environment \(spec.name) keeps its blocks in memory: they ended with the process")
        }
        return lifted ? .unblocked(via: "the store") : .notBlocked
    }
}
