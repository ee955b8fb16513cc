import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Logging
import VeneerConfig
import VeneerCore
import VeneerDecorators

/// The command line's way to the running instance of an environment: its admin API, at the
/// address the instance recorded in `STATE_DIR/run/ENV.admin` (port 0 picks one), else at the
/// configured one.
public enum InstanceAdmin {
    /// `host:port` (IPv6 in brackets) of the admin API of environment `spec`'s instance.
    public static func address(of spec: EnvironmentSpec) -> String {
        address(AdminAddressFile(stateDirectory: spec.stateDirectory, environment: spec.name).read() ?? spec.adminListen ?? spec.listen)
    }

    /// `host:port` to ask an admin API listening on `admin` at.
    public static func address(_ admin: ListenAddress) -> String {
        // A wildcard listener is asked on loopback, where the admin API answers.
        let host = admin.host == "0.0.0.0" ? "127.0.0.1" : (admin.host == "::" ? "::1" : admin.host)
        return host.contains(":") ? "[\(host)]:\(admin.port)" : "\(host):\(admin.port)"
    }

    /// What `POST /-/reload` said.
    public enum ReloadOutcome: Sendable, Equatable {
        /// The new configuration serves, as chain generation `generation`.
        case reloaded(generation: Int)
        /// The new configuration was refused (every error as `file:line:col: error: ...`);
        /// the previous one keeps serving.
        case refused(errors: [String])
        /// No instance of the environment answers: nothing listens, or what answers is not it.
        case unavailable(String)
    }

    /// Asks the running instance of `spec`'s environment to reload its configuration, as
    /// SIGHUP does, and waits for the outcome (a reload under way is waited for first).
    public static func reload(_ spec: EnvironmentSpec) async -> ReloadOutcome {
        let address = address(of: spec)
        guard let (status, body) = await exchange(.POST, "http://\(address)/-/reload?environment=\(queryValue(spec.name))") else {
            return .unavailable("no Veneer answers at \(address) for environment \(spec.name) (is it running?)")
        }
        switch status {
        case 200:
            return .reloaded(generation: body?["chain_generation"]?.intValue ?? 0)
        case 422:
            guard case .array(let errors)? = body?["errors"] else { break }
            return .refused(errors: errors.compactMap(\.stringValue))
        case 409:
            let serving = body?["environment"]?.stringValue ?? "another environment"
            return .unavailable("the Veneer at \(address) serves \(serving), not \(spec.name) (a stale \(AdminAddressFile(stateDirectory: spec.stateDirectory, environment: spec.name).path)?)")
        default:
            break
        }
        return .unavailable("what answers at \(address) is not a Veneer that can reload (HTTP \(status))")
    }

    /// What `POST /-/environment` said.
    public enum SwitchOutcome: Sendable, Equatable {
        /// The environment switched to serves, as chain generation `generation`; `warnings`
        /// say what a switch does not apply (its listen addresses).
        case switched(generation: Int, warnings: [String])
        /// It already served: nothing was rebuilt.
        case unchanged(generation: Int)
        /// The environment was refused (every error as `file:line:col: error: ...`, or why
        /// it is unknown); the previous one keeps serving.
        case refused(errors: [String])
        /// The instance runs under systemd, where the unit's name is the environment.
        case managedBySystemd(String)
        /// No instance of the environment answers: nothing listens, or what answers is not it.
        case unavailable(String)
    }

    /// Asks the instance serving environment `serving` to switch to environment `target` of
    /// its file, and waits for the outcome. `address` is where its admin API listens (see
    /// ``address(of:)``); the instance is asked to check that it serves `serving`.
    public static func switchEnvironment(at address: String, serving: String, to target: String) async -> SwitchOutcome {
        let request = JSONValue.object([("environment", .string(target))]).buffer
        guard let (status, body) = await exchange(.POST, "http://\(address)/-/environment?environment=\(queryValue(serving))", json: request) else {
            return .unavailable("no Veneer answers at \(address) for environment \(serving) (is it running? -e names the environment it serves now)")
        }
        let message = body?["message"]?.stringValue
        switch (status, body?["error"]?.stringValue) {
        case (200, _):
            let generation = body?["chain_generation"]?.intValue ?? 0
            if body?["status"]?.stringValue == "unchanged" { return .unchanged(generation: generation) }
            guard case .array(let warnings)? = body?["warnings"] else { return .switched(generation: generation, warnings: []) }
            return .switched(generation: generation, warnings: warnings.compactMap(\.stringValue))
        case (422, _):
            guard case .array(let errors)? = body?["errors"] else { break }
            return .refused(errors: errors.compactMap(\.stringValue))
        case (404, "unknown_environment"):
            return .refused(errors: [message ?? "no environment \(target)"])
        case (409, "managed_by_systemd"):
            return .managedBySystemd(message ?? EnvironmentSwitch.systemdRefusal(target: target))
        case (409, _):
            let other = body?["environment"]?.stringValue ?? "another environment"
            return .unavailable("the Veneer at \(address) serves \(other), not \(serving) (-e names the environment it serves now)")
        default:
            break
        }
        return .unavailable("what answers at \(address) is not a Veneer that can switch environments (HTTP \(status))")
    }

    /// `value` percent-encoded for a query.
    static func queryValue(_ value: String) -> String {
        value.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(.init(charactersIn: "-._~"))) ?? value
    }

    /// One request to an admin API: its status and JSON body, or nil when nobody answers.
    /// Building a chain may wait for stores and files: a reload or a switch can take a while.
    static func exchange(_ method: HTTPMethod, _ url: String, json: ByteBuffer? = nil) async -> (status: UInt, body: JSONValue?)? {
        var configuration = HTTPClient.Configuration()
        configuration.timeout = .init(connect: .seconds(1), read: .seconds(120))
        let client = HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: configuration)
        defer { _ = client.shutdown() }
        var request = HTTPClientRequest(url: url)
        request.method = method
        if let json {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(json)
        }
        do {
            let response = try await client.execute(request, timeout: .seconds(120))
            return (response.status.code, try? JSONValue.parse(try await response.body.collect(upTo: 1 << 20)))
        } catch {
            return nil
        }
    }

    /// Whether `path` names what a cache of `spec`'s environment may store (`/posts/1`, `/posts?userId=1`).
    public static func isCachePath(_ path: String, of spec: EnvironmentSpec) -> Bool {
        CacheDecorator.keyPrefix(forPath: path, resources: spec.resources) != nil
    }

    /// What `veneer purge` did.
    public enum PurgeOutcome: Sendable, Equatable {
        /// Removed this many stored keys, through `via` (the running instance, or the store).
        case purged(Int, via: String)
        /// The environment's chain has no cache.
        case noCache
        /// No instance runs and every cache keeps its entries in memory: they ended with it.
        case nothingToPurge(String)
    }

    /// Removes what the caches of `spec`'s environment store for `path` (every entry when
    /// nil): through the running instance (`DELETE /-/cache`), or, when none answers,
    /// straight in the caches' stores. `path` must be a path of the environment (see
    /// ``CacheDecorator/keyPrefix(forPath:resources:)``).
    public static func purge(_ spec: EnvironmentSpec, path: String?, logger: Logger) async throws -> PurgeOutcome {
        let caches = spec.chain.compactMap { $0.options as? CacheOptions }
        guard !caches.isEmpty else { return .noCache }
        let address = address(of: spec)
        var configuration = HTTPClient.Configuration()
        configuration.timeout = .init(connect: .seconds(1), read: .seconds(30))
        let client = HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: configuration)
        defer { _ = client.shutdown() }
        let unreserved = CharacterSet.alphanumerics.union(.init(charactersIn: "-._~"))
        var query = "?environment=" + (spec.name.addingPercentEncoding(withAllowedCharacters: unreserved) ?? spec.name)
        if let path { query += "&path=" + (path.addingPercentEncoding(withAllowedCharacters: unreserved.union(.init(charactersIn: "/"))) ?? path) }
        var request = HTTPClientRequest(url: "http://\(address)/-/cache\(query)")
        request.method = .DELETE
        do {
            let response = try await client.execute(request, timeout: .seconds(30))
            let body = try? JSONValue.parse(try await response.body.collect(upTo: 1 << 20))
            if response.status.code == 200, let memory = body?["removed_from_memory"]?.intValue, let store = body?["removed_from_store"]?.intValue {
                return .purged(max(memory, store), via: "the running instance at \(address)")
            }
            // Something else answers there (another environment's instance says 409): fall
            // back to the stores.
        } catch {
            // Nobody listens: no instance runs for this environment.
        }

        let prefix = path.flatMap { CacheDecorator.keyPrefix(forPath: $0, resources: spec.resources) } ?? ""
        var removed = 0
        var persistent = false
        for name in Set(caches.compactMap(\.store)) {
            guard let storeSpec = spec.stores[name] else { continue }
            persistent = true
            removed += try await StoreRegistry.withOpened(storeSpec, logger: logger) {
                try await $0.delete(CacheDecorator.storeNamespace, prefix: prefix)
            }
        }
        guard persistent else {
            return .nothingToPurge("no Veneer answers at \(address), and environment \(spec.name) keeps its cache in memory: it ended with the process")
        }
        return .purged(removed, via: "the store")
    }
}
