import Foundation
import HTTPTypes
import Logging
import NIOCore
import NIOHTTP1
import VeneerConfig
import VeneerCore

/// Runs the commands the registered decorators add to the command line
/// (``DecoratorFactory/commands``: `veneer purge`, `veneer unblock`), knowing none of them: each
/// is given the environment, its operand, the environment's running instance (found as every
/// command finds it, ``InstanceAdmin/locate(_:)``) and its stores.
public enum DecoratorCommands {
    /// Runs `action`, which `decorator` offers, on environment `spec` with `operand` (nil
    /// with `--all`); an environment without the decorator fails (exit 1).
    public static func run(_ action: CommandLineAction, of decorator: DecoratorFactory, spec: EnvironmentSpec, operand: String?,
                           logger: Logger) async throws -> CommandLineOutcome {
        let options = spec.chain.filter { $0.name == decorator.name }.map(\.options)
        guard !options.isEmpty else { return .failed("environment \(spec.name) has no \(decorator.name)") }
        return try await action.run(InstanceCommandContext(spec: spec, operand: operand, logger: logger), options: options)
    }
}

/// The runtime's ``CommandLineContext``: the running instance is looked for once, when the
/// command first asks for it.
actor InstanceCommandContext: CommandLineContext {
    nonisolated let spec: EnvironmentSpec
    nonisolated let operand: String?
    nonisolated let logger: Logger
    private var located: InstanceAdmin.Located?

    init(spec: EnvironmentSpec, operand: String?, logger: Logger) {
        self.spec = spec
        self.operand = operand
        self.logger = logger
    }

    /// Where the instance of the environment answers, or why it does not: looked for once.
    private func locate() async -> InstanceAdmin.Located {
        if let located { return located }
        let found = await InstanceAdmin.locate(spec)
        located = found
        if case .other = found {
            logger.warning("\(InstanceAdmin.notFound(found, environment: spec.name, configFile: spec.configFile)); it is not asked")
        }
        return found
    }

    func askInstance(_ method: HTTPRequest.Method, _ path: String, query: [(String, String)], timeout: Duration) async -> AdminAnswer? {
        guard case .found(let address) = await locate() else { return nil }
        var url = InstanceAdmin.url(address, "/-/\(path)?environment=\(InstanceAdmin.queryValue(spec.name))")
        let allowed = CharacterSet.alphanumerics.union(.init(charactersIn: "-._~/"))
        for (name, value) in query { url += "&\(name)=\(value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value)" }
        guard let (status, body) = await InstanceAdmin.exchange(HTTPMethod(rawValue: method.rawValue), url, timeout: TimeAmount(timeout)) else {
            return nil
        }
        return AdminAnswer(status: Int(status), body: body, address: address)
    }

    func instanceMissing() async -> String {
        InstanceAdmin.notFound(await locate(), environment: spec.name, configFile: spec.configFile)
    }

    nonisolated func withStore<T: Sendable>(named name: String, _ body: (any KeyValueStore) async throws -> T) async throws -> T? {
        guard let store = spec.stores[name] else { return nil }
        return try await StoreRegistry.withOpened(store, logger: logger, body)
    }
}
