import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Testing
@testable import VeneerRuntime
@testable import VeneerServer
import VeneerCore
import VeneerTestSupport

@Suite("Admin API under /-/")
struct AdminTests {
    @Test("health says ok with the environment; chain shows the active chain; metrics are Prometheus text")
    func endpoints() async throws {
        let yaml = "environments: {development: {origin: {mock: {}}, chain: [{latency_log: {label: edge, slow: 1s}}]}}"
        try await withVeneer(yaml: yaml) { (veneer: RunningVeneer) async throws in
            _ = try await veneer.request("GET", "/posts")
            let health = try await veneer.request("GET", "/-/health")
            #expect(health.status == 200)
            #expect(health.json?["status"] as? String == "ok")
            #expect(health.json?["environment"] as? String == "development")
            let chain = try await veneer.request("GET", "/-/chain")
            let links = try #require(chain.json?["chain"] as? [[String: Any]])
            #expect((links.first?["latency_log"] as? [String: Any])?["label"] as? String == "edge")
            #expect((chain.json?["origin"] as? [String: Any])?["mock"] != nil)
            let metrics = try await veneer.request("GET", "/-/metrics")
            #expect(metrics.header("Content-Type")?.hasPrefix("text/plain") == true)
            #expect(metrics.text.contains(#"veneer_request_duration_seconds_count{label="edge",method="GET",route="/posts",status="200"} 1"#))
        }
    }

    @Test("health turns 503 degraded with the reasons a component reports")
    func degraded() async throws {
        try await withVeneer(yaml: "environments: {development: {origin: {mock: {}}}}") { (veneer: RunningVeneer) async throws in
            veneer.instance.health.report("auth_refresh", .degraded("refresh token rejected (invalid_grant)"))
            let health = try await veneer.request("GET", "/-/health")
            #expect(health.status == 503)
            #expect(health.json?["status"] as? String == "degraded")
            #expect(health.json?["problems"] as? [String] == ["auth_refresh: refresh token rejected (invalid_grant)"])
        }
    }

    @Test("the admin API answers loopback clients only")
    func loopbackOnly() async throws {
        try await withVeneer(yaml: "environments: {development: {origin: {mock: {}}}}") { (veneer: RunningVeneer) async throws in
            let admin = AdminAPI(chain: veneer.chain, health: veneer.instance.health, metrics: veneer.instance.metrics,
                                 reloadStatus: ReloadStatus())
            let edge = ProxyEdge(chain: veneer.chain, admin: admin, logger: quietLogger(), adminOnly: false, servesAdmin: true)
            func health(from client: String) async -> HTTPResponse.Status? {
                switch edge.begin(method: .get, target: "/-/health", fields: [:], body: .complete(ByteBuffer()), client: ClientAddress(client)) {
                case .answered(let response): return response.status
                case .waiting(let pending): return await edge.complete(pending).status
                case .streamed: return nil
                }
            }
            #expect(await health(from: "192.0.2.7") == .notFound)
            #expect(await health(from: "127.0.0.1") == .ok)
            #expect(await health(from: "::1") == .ok)
        }
    }

    @Test("admin: {listen: ...} moves the admin API to its own listener")
    func separateListener() async throws {
        // Port 0: the admin listener picks a free port of its own and reports it.
        let yaml = "environments: {development: {origin: {mock: {}}, admin: {listen: \"127.0.0.1:0\"}}}"
        try await withVeneer(yaml: yaml) { (veneer: RunningVeneer) async throws in
            let adminPort = try #require(veneer.adminPort)
            #expect(adminPort != veneer.port && adminPort != 0)
            #expect(try await veneer.request("GET", "/-/health").status == 404)
            #expect(try await RawHTTP.request(port: adminPort, "GET", "/-/health").status == 200)
            #expect(try await RawHTTP.request(port: adminPort, "GET", "/posts").status == 404)
        }
    }

    @Test("GET /-/ lists the admin endpoints, the runtime's and those the chain's decorators add")
    func index() async throws {
        let yaml = "environments: {development: {origin: {mock: {}}, chain: [{block_list: {deny: {clients: [192.0.2.0/24]}}}, cache]}}"
        try await withVeneer(yaml: yaml) { (veneer: RunningVeneer) async throws in
            let index = try await veneer.request("GET", "/-/")
            #expect(index.status == 200)
            let endpoints = try #require(index.json?["endpoints"] as? [[String: Any]])
            let paths = endpoints.compactMap { $0["path"] as? String }
            #expect(paths == ["/-/", "/-/status", "/-/events", "/-/health", "/-/live", "/-/ready", "/-/chain", "/-/metrics", "/-/reload", "/-/environment",
                              "/-/blocks", "/-/blocks/{account}", "/-/cache"])
            #expect(endpoints.first { $0["path"] as? String == "/-/ready" }?["methods"] as? [String] == ["GET"])
            // The decorators' endpoints say their methods and what each does, as the runtime's do.
            func endpoint(_ path: String) -> (methods: [String], summary: String) {
                let found = endpoints.first { $0["path"] as? String == path }
                return (found?["methods"] as? [String] ?? [], found?["summary"] as? String ?? "")
            }
            #expect(endpoint("/-/blocks").methods == ["GET"] && endpoint("/-/blocks").summary.contains("learned blocks"))
            #expect(endpoint("/-/blocks/{account}").methods == ["DELETE", "POST"])
            #expect(endpoint("/-/blocks/{account}").summary.contains("DELETE: lift") && endpoint("/-/blocks/{account}").summary.contains("action=unblock"))
            #expect(endpoint("/-/cache").methods == ["GET", "DELETE"])
            #expect(endpoint("/-/cache").summary.contains("GET ?path=") && endpoint("/-/cache").summary.contains("DELETE without a path"))
            for listed in endpoints { #expect(!(listed["summary"] as? String ?? "").contains("added by a decorator"), "\(listed)") }
            #expect(index.json?["environment"] as? String == "development")
        }
    }

    @Test("health adds the version and the uptime")
    func healthVersionUptime() async throws {
        let clock = ManualClock()
        try await withVeneer(yaml: "environments: {development: {origin: {mock: {}}}}", clock: clock) { (veneer: RunningVeneer) async throws in
            clock.advance(by: .seconds(90))
            let health = try await veneer.request("GET", "/-/health")
            #expect(health.json?["version"] as? String == VeneerVersion.text)
            #expect(health.json?["uptime_seconds"] as? Int == 90)
        }
    }

    @Test("live answers while the process does; ready once the chain is built and its stores answer")
    func liveAndReady() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let yaml = """
            state_dir: \(directory)
            stores: { local: { sqlite: veneer.sqlite } }
            environments: {development: {origin: {mock: {}}, chain: [{block_list: {store: local, learn: {status: 403}}}]}}
            """
        try await withVeneer(yaml: yaml) { (veneer: RunningVeneer) async throws in
            let live = try await veneer.request("GET", "/-/live")
            #expect(live.status == 200 && live.json?["status"] as? String == "live")
            let ready = try await veneer.request("GET", "/-/ready")
            #expect(ready.status == 200, "\(ready.text)")
            #expect(ready.json?["status"] as? String == "ready")
            #expect((ready.json?["stores"] as? [String: Any])?["local"] as? String == "ok")
            let post = try await veneer.request("POST", "/-/ready")
            #expect(post.status == 405 && post.header("Allow") == "GET, HEAD")
        }
    }

    @Test("ready is 503 while a store of the chain does not answer (a database that is down); live stays 200")
    func notReadyWhenStoreDown() async throws {
        try await withRefusingPort { port in
            let yaml = """
                stores: { shared: { postgres: "postgres://veneer@127.0.0.1:\(port)/veneer" } }
                environments: {development: {origin: {mock: {}}, chain: [{block_list: {store: shared, learn: {status: 403}}}]}}
                """
            try await withVeneer(yaml: yaml) { (veneer: RunningVeneer) async throws in
                let ready = try await veneer.request("GET", "/-/ready")
                #expect(ready.status == 503, "\(ready.text)")
                #expect(ready.json?["status"] as? String == "not_ready")
                #expect((ready.json?["stores"] as? [String: Any])?["shared"] as? String == "not answering")
                #expect(try await veneer.request("GET", "/-/live").status == 200)
            }
        }
    }

    @Test("POST /-/reload reloads as SIGHUP does and answers with the outcome; every error as file:line:col: error:")
    func reloadEndpoint() async throws {
        let box = YAMLBox("environments: {development: {origin: {mock: {}}}}")
        try await withVeneer(yaml: "", yamlProvider: { box.value }) { (veneer: RunningVeneer) async throws in
            box.set("environments: {development: {origin: {mock: {}}, chain: [latency_log]}}")
            let reloaded = try await veneer.request("POST", "/-/reload")
            #expect(reloaded.status == 200, "\(reloaded.text)")
            #expect(reloaded.json?["status"] as? String == "reloaded" && reloaded.json?["chain_generation"] as? Int == 2)
            #expect(veneer.chain.generation.number == 2)

            box.set("environments:\n  development:\n    origin: { mock: {} }\n    chain: [caching, { latency_log: { slow: soon } }]\n")
            let refused = try await veneer.request("POST", "/-/reload")
            #expect(refused.status == 422)
            #expect(refused.json?["status"] as? String == "failed" && refused.json?["chain_generation"] as? Int == 2)
            #expect(refused.json?["errors"] as? [String] == [
                "test.yaml:4:13: error: environments.development.chain[0]: unknown decorator 'caching' (did you mean 'cache'?) (known: auth_refresh, block_list, cache, fault, latency_log, record)",
                #"test.yaml:4:45: error: environments.development.chain[1].latency_log.slow: "soon" is not a duration (use e.g. 30s, 5m, 1h)"#,
            ])
            #expect(veneer.chain.generation.number == 2, "the previous chain keeps serving")

            let elsewhere = try await veneer.request("POST", "/-/reload?environment=production")
            #expect(elsewhere.status == 409 && elsewhere.json?["environment"] as? String == "development")
            #expect(try await veneer.request("GET", "/-/reload").status == 405)
        }
    }

    @Test("a problem found only while building (an unreadable secret file) has its place in the file too")
    func buildProblemHasPlace() async throws {
        let box = YAMLBox("environments: {development: {origin: {mock: {}}}}")
        try await withVeneer(yaml: "", yamlProvider: { box.value }) { (veneer: RunningVeneer) async throws in
            box.set("""
                environments:
                  development:
                    origin: { mock: {} }
                    chain:
                      - auth_refresh: { token_url: "http://127.0.0.1:9/t", client_id: x, client_secret_file: /nonexistent/veneer/s, refresh_token: r }
                """)
            let refused = try await veneer.request("POST", "/-/reload")
            #expect(refused.status == 422)
            #expect((refused.json?["errors"] as? [String])?.first?.hasPrefix(
                "test.yaml:5:9: error: environments.development.chain[0].auth_refresh: secret file /nonexistent/veneer/s does not exist") == true,
                "\(refused.text)")
        }
    }
}
