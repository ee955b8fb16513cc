import Foundation
import HTTPTypes
import NIOCore
import Prometheus
import Synchronization
import VeneerConfig
import VeneerCore
import VeneerServer

/// The admin API under `/-/`: its index, health, liveness and readiness, the active chain,
/// Prometheus metrics, and the routes the chain's decorators add.
struct AdminAPI: AdminResponder {
    let chain: ActiveChain
    let health: HealthBoard
    let metrics: PrometheusCollectorRegistry
    let reloadStatus: ReloadStatus
    /// The configuration file as a canonical path (see ``ConfigIdentity``): `veneer unblock`
    /// checks that it reached the instance of its own file.
    var configPath: String = ConfigIdentity.builtIn
    /// When the process started serving, for `uptime_seconds`.
    var startedAt = Date()
    var clock: any VeneerClock = SystemClock()
    /// Reloads the configuration, in turn with SIGHUP's reloads (nil: `POST /-/reload` is 404).
    var reload: (@Sendable () async -> Result<ChainGeneration, ConfigError>)?
    /// The last requests answered, for the status page and `/-/events`.
    var feed: RequestFeed?
    /// Switches to another environment of the file, in turn with the reloads (nil: `POST
    /// /-/environment` is 404).
    var switchEnvironment: (@Sendable (String) async -> EnvironmentSwitchOutcome)?
    /// The environment names of the file as last read (what a switcher offers).
    var environments: @Sendable () -> [String] = { [] }
    /// Why the instance does not switch (under systemd), or nil.
    var switchRefusal: String?
    /// Sets the gauges read at scrape time (`limits.buffered`'s figures) before `/-/metrics` is written.
    var refreshGauges: @Sendable () -> Void = {}
    /// The duration histograms, written after `metrics` (see ``DurationHistogramRegistry``).
    var durationHistograms: DurationHistogramRegistry?

    /// One endpoint of the runtime's own, as `GET /-/` lists it.
    struct Endpoint {
        let name: String
        let methods: [HTTPRequest.Method]
        let summary: String
    }

    /// The runtime's own endpoints, in the order `GET /-/` lists them.
    static let endpoints: [Endpoint] = [
        Endpoint(name: "", methods: [.get], summary: "this list; the HTML status page for a browser (Accept: text/html)"),
        Endpoint(name: "status", methods: [.get],
                 summary: "what the status page shows: the chain with each entry's live figures, learned blocks, the last 100 requests"),
        Endpoint(name: "events", methods: [.get], summary: "each request the chain answers, as it is answered (server-sent events)"),
        Endpoint(name: "health", methods: [.get], summary: "200 ok or 503 degraded, with the reasons, version, uptime and the configuration loaded"),
        Endpoint(name: "live", methods: [.get], summary: "200 while the process answers"),
        Endpoint(name: "ready", methods: [.get], summary: "200 once the chain is built and its stores answer, else 503"),
        Endpoint(name: "chain", methods: [.get], summary: "the active environment, origin and chain with their options, secrets redacted"),
        Endpoint(name: "metrics", methods: [.get], summary: "Prometheus text"),
        Endpoint(name: "reload", methods: [.post],
                 summary: "re-read the configuration, as SIGHUP does; 200 with the new generation, or 422 with every error (the old chain keeps serving)"),
        Endpoint(name: "environment", methods: [.get, .post],
                 summary: "GET: the environment serving and those of the file; POST {\"environment\":\"NAME\"} (or a form's environment=NAME): switch to it, as a reload; 422 with every error, 404 unknown, 409 under systemd"),
    ]

    func respond(method: HTTPRequest.Method, path: String, query: String?, headers: HTTPFields, body: ByteBuffer) async -> ProxyResponse {
        // `environment=ENV` makes sure a command reaches the instance it means: it found the
        // address in a file that may be stale, or in a configuration where two environments
        // share a port.
        let serving = chain.generation.spec.name
        if let asked = AdminRequest(method: method, rest: "", query: query).parameter("environment"), asked != serving {
            return Self.noStore(.conflict, .object([
                ("error", .string("wrong_environment")), ("environment", .string(serving)),
                ("message", .string("This instance serves environment \(serving), not \(asked).")),
            ]))
        }
        guard let endpoint = Self.endpoints.first(where: { $0.name == path }) else {
            // Routes the chain's decorators added (such as /-/blocks).
            let routes = chain.generation.adminRoutes
            let name = String(path.prefix { $0 != "/" })
            if let route = routes.route(name) {
                let rest = path.dropFirst(name.count).drop { $0 == "/" }
                return await route(AdminRequest(method: method, rest: String(rest), query: query, body: body, headers: headers))
            }
            let known = (Self.endpoints.map(\.name) + routes.names).map { "/-/\($0)" }.joined(separator: ", ")
            return ProxyError.notFound("No admin resource /-/\(ProxyEdge.printable(path)) (known: \(known)).").response
        }
        let allowed = endpoint.methods.contains(.get) ? endpoint.methods + [.head] : endpoint.methods
        guard allowed.contains(method) else {
            var error = ProxyError(.methodNotAllowed, "\(method.rawValue) is not allowed on /-/\(path).")
            error.headers[.allow] = allowed.map(\.rawValue).joined(separator: ", ")
            return error.response
        }
        switch path {
        case "":
            if AdminRequest(method: method, rest: "", headers: headers).acceptsHTML { return StatusPage.response(await statusSnapshot()) }
            return indexResponse()
        case "status":
            return Self.noStore(.ok, await statusSnapshot().json)
        case "events":
            // A GET is streamed (``stream(path:query:headers:)``); a HEAD gets the head.
            if case .failure(let error) = Self.eventsAfter(query: query, headers: headers) { return error.response }
            return ProxyResponse(status: .ok, headers: Self.eventStreamHeaders)
        case "health": return healthResponse()
        case "live": return Self.noStore(.ok, .object([("status", .string("live"))]))
        case "ready": return await readyResponse()
        case "reload": return await reloadResponse()
        case "environment": return method == .post ? await switchResponse(headers: headers, body: body) : environmentResponse()
        case "chain":
            var body = ByteBuffer(string: chain.generation.spec.summary.prettyText())
            body.writeStaticString("\n")
            return .json(.ok, body, headers: [.cacheControl: "no-store"])
        default:
            var bytes: [UInt8] = []
            refreshGauges()
            metrics.emit(into: &bytes)
            durationHistograms?.emit(into: &bytes)
            return ProxyResponse(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8", .cacheControl: "no-store"],
                                 body: ByteBuffer(bytes: bytes))
        }
    }

    /// `GET /-/`: every endpoint, the runtime's and those the active chain's decorators added.
    func indexResponse() -> ProxyResponse {
        var listed: [JSONValue] = Self.endpoints.map { endpoint in
            .object([("path", .string("/-/\(endpoint.name)")), ("methods", .array(endpoint.methods.map { .string($0.rawValue) })),
                     ("summary", .string(endpoint.summary))])
        }
        // Those the chain's decorators add, each with its methods and what they do.
        for endpoint in chain.generation.adminRoutes.endpoints {
            listed.append(.object([("path", .string(endpoint.path)), ("methods", .array(endpoint.methods.map { .string($0.rawValue) })),
                                   ("summary", .string(endpoint.summary))]))
        }
        return Self.noStore(.ok, .object([("environment", .string(chain.generation.spec.name)), ("endpoints", .array(listed))]))
    }

    /// What the status page and `GET /-/status` show.
    func statusSnapshot() async -> StatusSnapshot {
        let generation = chain.generation
        var names = environments()
        if !names.contains(generation.spec.name) { names.insert(generation.spec.name, at: 0) }
        return await StatusSnapshot.read(generation, environments: names, switchRefusal: switchRefusal, health: health, feed: feed,
                                         uptimeSeconds: max(0, Int(clock.now().timeIntervalSince(startedAt))))
    }

    func healthResponse() -> ProxyResponse {
        let generation = chain.generation
        let problems = health.problems
        var members: [(String, JSONValue)] = [
            ("status", .string(problems.isEmpty ? "ok" : "degraded")),
            ("environment", .string(generation.spec.name)),
            ("version", .string(VeneerVersion.text)),
            ("uptime_seconds", .int(max(0, Int(clock.now().timeIntervalSince(startedAt))))),
            ("config", .string(generation.spec.configFile)),
            ("config_path", .string(configPath)),
            ("config_loaded_at", .string(Timestamp.iso8601(generation.loadedAt))),
            ("chain_generation", .int(generation.number)),
        ]
        if !problems.isEmpty { members.append(("problems", .array(problems.map(JSONValue.string)))) }
        if let failure = reloadStatus.lastFailure {
            members.append(("last_reload_error", .string(failure)))
        }
        return Self.noStore(problems.isEmpty ? .ok : .serviceUnavailable, .object(members))
    }

    /// `GET /-/ready`: the listeners open only once the first chain is built, so a connection
    /// refused means "not ready yet"; once they are open, ready means every store of the
    /// active chain answers a read now (a database that is down makes it 503).
    func readyResponse() async -> ProxyResponse {
        let generation = chain.generation
        var problems: [String] = []
        var stores: [(String, JSONValue)] = []
        let held = generation.carried.all.compactMap { $0 as? any HeldStore }.sorted { $0.name < $1.name }
        for item in held {
            do {
                _ = try await item.store.get("veneer.ready", "probe", now: clock.now())
                stores.append((item.name, .string("ok")))
            } catch {
                stores.append((item.name, .string("not answering")))
                problems.append("store \(item.name): \(error)")
            }
        }
        var members: [(String, JSONValue)] = [
            ("status", .string(problems.isEmpty ? "ready" : "not_ready")),
            ("environment", .string(generation.spec.name)),
            ("chain_generation", .int(generation.number)),
            ("stores", .object(stores)),
        ]
        if !problems.isEmpty { members.append(("problems", .array(problems.map(JSONValue.string)))) }
        return Self.noStore(problems.isEmpty ? .ok : .serviceUnavailable, .object(members))
    }

    /// `POST /-/reload`: the same reload as SIGHUP, through the same queue (it waits for a
    /// reload under way).
    func reloadResponse() async -> ProxyResponse {
        let serving = chain.generation.spec.name
        guard let reload else { return ProxyError.notFound("Reload is not available here.").response }
        switch await reload() {
        case .success(let generation):
            return Self.noStore(.ok, .object([
                ("status", .string("reloaded")), ("environment", .string(serving)), ("chain_generation", .int(generation.number)),
                ("carried_over", .array(generation.carried.keys.map { .string($0.description) })),
            ]))
        case .failure(let error):
            return Self.noStore(.unprocessableContent, .object([
                ("status", .string("failed")), ("environment", .string(serving)), ("chain_generation", .int(chain.generation.number)),
                ("message", .string("The configuration was not reloaded; the previous one keeps serving.")),
                ("errors", .array(error.diagnostics.map { .string($0.report()) })),
            ]))
        }
    }

    /// `text/event-stream`, never stored.
    static let eventStreamHeaders: ProxyHeaders = [.contentType: "text/event-stream; charset=utf-8", .cacheControl: "no-store"]

    /// `GET /-/environment`: the environment serving, and those of the file as last read.
    func environmentResponse() -> ProxyResponse {
        var members: [(String, JSONValue)] = [
            ("environment", .string(chain.generation.spec.name)), ("environments", .array(environments().map(JSONValue.string))),
            ("switchable", .bool(switchEnvironment != nil && switchRefusal == nil)),
        ]
        if let switchRefusal { members.append(("message", .string(switchRefusal))) }
        return Self.noStore(.ok, .object(members))
    }

    /// `POST /-/environment`: a switch, as ``VeneerInstance/switchEnvironment(to:)`` does it.
    /// A form a browser posted (the status page's switcher) is sent back to `/-/` on success.
    func switchResponse(headers: HTTPFields, body: ByteBuffer) async -> ProxyResponse {
        guard let switchEnvironment else { return ProxyError.notFound("Switching environments is not available here.").response }
        guard let request = EnvironmentSwitch.request(body: body, contentType: headers[.contentType]) else {
            return ProxyError(.badRequest, #"Name the environment: {"environment":"NAME"} (application/json) or environment=NAME (application/x-www-form-urlencoded)."#)
                .response
        }
        let browser = request.isForm && headers[values: .accept].contains { $0.lowercased().contains("text/html") }
        let serving = chain.generation.spec.name
        let target = request.environment
        switch await switchEnvironment(target) {
        case .switched(let generation, let previous, let warnings):
            if browser { return Self.seeOther("/-/") }
            return Self.noStore(.ok, .object([
                ("status", .string("switched")), ("environment", .string(generation.spec.name)), ("previous", .string(previous)),
                ("chain_generation", .int(generation.number)),
                ("carried_over", .array(generation.carried.keys.map { .string($0.description) })),
                ("warnings", .array(warnings.map(JSONValue.string))),
            ]))
        case .unchanged(let generation):
            if browser { return Self.seeOther("/-/") }
            return Self.noStore(.ok, .object([
                ("status", .string("unchanged")), ("environment", .string(generation.spec.name)), ("chain_generation", .int(generation.number)),
            ]))
        case .failed(let error):
            return Self.noStore(.unprocessableContent, .object([
                ("status", .string("failed")), ("environment", .string(serving)), ("target", .string(target)),
                ("chain_generation", .int(chain.generation.number)),
                ("message", .string("Environment \(target) was not switched to; \(serving) keeps serving.")),
                ("errors", .array(error.diagnostics.map { .string($0.report()) })),
            ]))
        case .unknown(let names):
            return Self.noStore(.notFound, .object([
                ("error", .string("unknown_environment")), ("environment", .string(serving)), ("environments", .array(names.map(JSONValue.string))),
                ("message", .string("No environment \(target) in the configuration file (environments: \(names.joined(separator: ", "))).")),
            ]))
        case .refused(let message):
            return Self.noStore(.conflict, .object([
                ("error", .string("managed_by_systemd")), ("environment", .string(serving)), ("message", .string(message)),
            ]))
        }
    }

    /// 303 See Other to `location`: a browser that posted a form loads that page with GET.
    static func seeOther(_ location: String) -> ProxyResponse {
        ProxyResponse(status: .seeOther, headers: [.location: location, .cacheControl: "no-store"])
    }

    static func noStore(_ status: HTTPResponse.Status, _ value: JSONValue) -> ProxyResponse {
        var body = value.buffer
        body.writeStaticString("\n")
        return .json(status, body, headers: [.cacheControl: "no-store"])
    }
}

/// What the last reload said, for `/-/health` and `STATUS=`.
final class ReloadStatus: Sendable {
    private let failure = Mutex<String?>(nil)
    var lastFailure: String? { failure.withLock { $0 } }
    func set(_ text: String?) { failure.withLock { $0 = text } }
}
