import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Logging
import VeneerConfig
import VeneerCore

/// The command line's way to the running instance of an environment: its admin API, at the
/// address the instance recorded in `STATE_DIR/run/ENV.admin` (port 0 picks one), else at the
/// configured one. Whatever answers there must say (`/-/health`) that it serves that
/// environment of that configuration file: `reload`, `switch` and the decorators' commands
/// (``DecoratorCommands``) all find it through
/// ``locate(configFile:environment:stateDirectory:configured:)`` and never act on another
/// configuration's instance (a `make run` dev proxy of another checkout on the same port).
public enum InstanceAdmin {
    /// What answers where the instance of an environment should.
    public enum Located: Sendable, Equatable {
        /// The instance of that file and environment answers at `address`.
        case found(address: String)
        /// Nothing (or nothing that is a Veneer) answers at `address`; `source` says where
        /// the address came from.
        case none(address: String, source: String)
        /// Another Veneer answers at `address`: another environment, or another file's.
        case other(address: String, source: String, environment: String, configPath: String)

        /// The address asked.
        public var address: String {
            switch self {
            case .found(let address), .none(let address, _), .other(let address, _, _, _): return address
            }
        }
    }

    /// Finds the running instance serving `environment` of `configFile`: at the address it
    /// recorded under `stateDirectory`, else at `configured` (its `admin.listen` or `listen`),
    /// checked by what it says of itself (`/-/health`: its environment and canonical
    /// configuration path). nil `configured`: only a recorded address is asked.
    public static func locate(configFile: String, environment: String, stateDirectory: String, configured: ListenAddress?) async -> Located {
        let file = AdminAddressFile(stateDirectory: stateDirectory, environment: environment)
        let source: String
        let admin: ListenAddress
        if let recorded = file.read() {
            admin = recorded
            source = "recorded in \(file.path)"
        } else if let configured {
            admin = configured
            source = "environment \(environment)'s configured address; no instance of it recorded one in \(stateDirectory)/run"
        } else {
            return .none(address: "(none)", source: "no instance of environment \(environment) recorded its address in \(stateDirectory)/run")
        }
        let address = address(admin)
        guard let health = await exchange(.GET, url(address, "/-/health"), timeout: .seconds(10)),
              let serving = health.body?["environment"]?.stringValue else {
            return .none(address: address, source: source)
        }
        // An instance from before config_path was reported: its word cannot be checked.
        let configPath = health.body?["config_path"]?.stringValue ?? "(unknown)"
        guard serving == environment, configPath == ConfigIdentity.canonicalPath(configFile) else {
            return .other(address: address, source: source, environment: serving, configPath: configPath)
        }
        return .found(address: address)
    }

    /// ``locate(configFile:environment:stateDirectory:configured:)`` for environment `spec`.
    public static func locate(_ spec: EnvironmentSpec) async -> Located {
        await locate(configFile: spec.configFile, environment: spec.name, stateDirectory: spec.stateDirectory,
                     configured: spec.adminListen ?? spec.listen)
    }

    /// Why nothing was done through an instance of `environment` of `configFile`, for a person.
    public static func notFound(_ located: Located, environment: String, configFile: String) -> String {
        switch located {
        case .found(let address):
            return "the instance of environment \(environment) at \(address) did not answer as expected"
        case .none(let address, let source) where address == "(none)":
            return "no Veneer serving environment \(environment) of \(configFile) was found (\(source))"
        case .none(let address, let source):
            return "no Veneer answers at \(address) (\(source)): environment \(environment) of \(configFile) does not run there"
        case .other(let address, let source, let serving, let path):
            return "the Veneer at \(address) (\(source)) serves environment \(serving) of \(path), "
                + "not environment \(environment) of \(ConfigIdentity.canonicalPath(configFile))"
        }
    }

    /// The URL of `pathAndQuery` on the admin API at `address` (``address(_:)``): a Unix
    /// socket's is `http+unix://` and its percent-encoded path, as AsyncHTTPClient takes it.
    public static func url(_ address: String, _ pathAndQuery: String) -> String {
        guard address.hasPrefix("unix:") else { return "http://\(address)\(pathAndQuery)" }
        let path = String(address.dropFirst(5))
        let encoded = path.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(.init(charactersIn: "-._~"))) ?? path
        return "http+unix://\(encoded)\(pathAndQuery)"
    }

    /// `host:port` (or `unix:/path`) to ask an admin API listening on `admin` at.
    public static func address(_ admin: ListenAddress) -> String {
        if admin.socketPath != nil { return admin.description }
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

    /// Asks the running instance of `spec`'s environment (``locate(_:)``) to reload its
    /// configuration, as SIGHUP does, and waits for the outcome (a reload under way is waited
    /// for first).
    public static func reload(_ spec: EnvironmentSpec) async -> ReloadOutcome {
        let located = await locate(spec)
        guard case .found(let address) = located else {
            return .unavailable(notFound(located, environment: spec.name, configFile: spec.configFile))
        }
        guard let (status, body) = await exchange(.POST, url(address, "/-/reload?environment=\(queryValue(spec.name))")) else {
            return .unavailable("the Veneer at \(address) stopped answering")
        }
        switch status {
        case 200:
            return .reloaded(generation: body?["chain_generation"]?.intValue ?? 0)
        case 422:
            guard case .array(let errors)? = body?["errors"] else { break }
            return .refused(errors: errors.compactMap(\.stringValue))
        case 409:
            // Switched away between the two requests.
            let serving = body?["environment"]?.stringValue ?? "another environment"
            return .unavailable("the Veneer at \(address) serves \(serving) now, not \(spec.name)")
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
    /// its file, and waits for the outcome. `address` is where its admin API listens, as
    /// ``locate(configFile:environment:stateDirectory:configured:)`` found it; the instance
    /// is asked to check that it serves `serving`.
    public static func switchEnvironment(at address: String, serving: String, to target: String) async -> SwitchOutcome {
        let request = JSONValue.object([("environment", .string(target))]).buffer
        guard let (status, body) = await exchange(.POST, url(address, "/-/environment?environment=\(queryValue(serving))"), json: request) else {
            return .unavailable("the Veneer at \(address) stopped answering")
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
            // Switched away between the two requests.
            let other = body?["environment"]?.stringValue ?? "another environment"
            return .unavailable("the Veneer at \(address) serves \(other) now, not \(serving) (-e names the environment it serves now)")
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
    static func exchange(_ method: HTTPMethod, _ url: String, json: ByteBuffer? = nil,
                         timeout: TimeAmount = .seconds(120)) async -> (status: UInt, body: JSONValue?)? {
        var configuration = HTTPClient.Configuration()
        configuration.timeout = .init(connect: .seconds(1), read: timeout)
        let client = HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: configuration)
        defer { _ = client.shutdown() }
        var request = HTTPClientRequest(url: url)
        request.method = method
        // AsyncHTTPClient sends no Host to a Unix socket, and HTTP/1.1 needs one (any will do there).
        if url.hasPrefix("http+unix:") { request.headers.add(name: "Host", value: "localhost") }
        if let json {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(json)
        }
        do {
            let response = try await client.execute(request, timeout: timeout)
            return (response.status.code, try? JSONValue.parse(try await response.body.collect(upTo: 1 << 20)))
        } catch {
            return nil
        }
    }
}
