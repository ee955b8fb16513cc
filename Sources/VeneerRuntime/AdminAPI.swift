import Foundation
import HTTPTypes
import NIOCore
import Prometheus
import Synchronization
import VeneerConfig
import VeneerCore
import VeneerDecorators
import VeneerServer

/// The admin API under `/-/`: health, the active chain, Prometheus metrics.
struct AdminAPI: AdminResponder {
    let chain: ActiveChain
    let health: HealthBoard
    let metrics: PrometheusCollectorRegistry
    let reloadStatus: ReloadStatus
    /// The configuration file as a canonical path (see ``ConfigIdentity``): `veneer unblock`
    /// checks that it reached the instance of its own file.
    var configPath: String = ConfigIdentity.builtIn

    func respond(method: HTTPRequest.Method, path: String, query: String?, headers: HTTPFields, body: ByteBuffer) async -> ProxyResponse {
        let readOnly = ["health", "chain", "metrics"]
        guard readOnly.contains(path) else {
            // Routes the chain's decorators added (such as /-/blocks).
            let routes = chain.generation.adminRoutes
            let name = String(path.prefix { $0 != "/" })
            if let route = routes.route(name) {
                let rest = path.dropFirst(name.count).drop { $0 == "/" }
                return await route(AdminRequest(method: method, rest: String(rest), body: body))
            }
            let known = (readOnly + routes.names).map { "/-/\($0)" }.joined(separator: ", ")
            return ProxyError.notFound("No admin resource /-/\(ProxyEdge.printable(path)) (known: \(known)).").response
        }
        guard method == .get || method == .head else {
            var error = ProxyError(.methodNotAllowed, "\(method.rawValue) is not allowed on /-/\(path).")
            error.headers[.allow] = "GET, HEAD"
            return error.response
        }
        switch path {
        case "health": return healthResponse()
        case "chain":
            var body = ByteBuffer(string: chain.generation.spec.summary.prettyText())
            body.writeStaticString("\n")
            return .json(.ok, body, headers: [.cacheControl: "no-store"])
        default:
            var bytes: [UInt8] = []
            metrics.emit(into: &bytes)
            return ProxyResponse(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8", .cacheControl: "no-store"],
                                 body: ByteBuffer(bytes: bytes))
        }
    }

    func healthResponse() -> ProxyResponse {
        let generation = chain.generation
        let problems = health.problems
        var members: [(String, JSONValue)] = [
            ("status", .string(problems.isEmpty ? "ok" : "degraded")),
            ("environment", .string(generation.spec.name)),
            ("config", .string(generation.spec.configFile)),
            ("config_path", .string(configPath)),
            ("config_loaded_at", .string(Timestamp.iso8601(generation.loadedAt))),
            ("chain_generation", .int(generation.number)),
        ]
        if !problems.isEmpty { members.append(("problems", .array(problems.map(JSONValue.string)))) }
        if let failure = reloadStatus.lastFailure {
            members.append(("last_reload_error", .string(failure)))
        }
        var body = JSONValue.object(members).buffer
        body.writeStaticString("\n")
        return .json(problems.isEmpty ? .ok : .serviceUnavailable, body, headers: [.cacheControl: "no-store"])
    }
}

/// What the last reload said, for `/-/health` and `STATUS=`.
final class ReloadStatus: Sendable {
    private let failure = Mutex<String?>(nil)
    var lastFailure: String? { failure.withLock { $0 } }
    func set(_ text: String?) { failure.withLock { $0 = text } }
}
