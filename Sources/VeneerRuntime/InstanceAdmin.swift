import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import VeneerConfig
import VeneerCore

/// The command line's way to the running instance of an environment: its admin API, at the
/// address the instance recorded in `STATE_DIR/run/ENV.admin` (port 0 picks one), else at the
/// configured one.
public enum InstanceAdmin {
    /// `host:port` (IPv6 in brackets) of the admin API of environment `spec`'s instance.
    public static func address(of spec: EnvironmentSpec) -> String {
        let admin = AdminAddressFile(stateDirectory: spec.stateDirectory, environment: spec.name).read() ?? spec.adminListen ?? spec.listen
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
        let environment = spec.name.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(.init(charactersIn: "-._~"))) ?? spec.name
        var configuration = HTTPClient.Configuration()
        // Building a chain may wait for stores and files: a reload can take a while.
        configuration.timeout = .init(connect: .seconds(1), read: .seconds(120))
        let client = HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: configuration)
        defer { _ = client.shutdown() }
        var request = HTTPClientRequest(url: "http://\(address)/-/reload?environment=\(environment)")
        request.method = .POST
        let status: UInt
        let body: JSONValue?
        do {
            let response = try await client.execute(request, timeout: .seconds(120))
            status = response.status.code
            body = try? JSONValue.parse(try await response.body.collect(upTo: 1 << 20))
        } catch {
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
}
