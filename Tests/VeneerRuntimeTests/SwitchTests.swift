import Foundation
import NIOCore
import Testing
import VeneerConfig
import VeneerCore
@testable import VeneerRuntime
import VeneerTestSupport

@Suite("Switch: serve another environment of the same file, live")
struct SwitchTests {
    /// development and staging have caches with the same options; production's differ.
    static func yaml(stagingTag: String = "staging", latency: String = "0s") -> String {
        """
        environments:
          development:
            origin: { mock: { latency: \(latency) } }
            chain: [{tag: {name: dev}}, {cache: {ttl: 1h}}]
          staging:
            origin: { mock: {} }
            chain: [{tag: {name: \(stagingTag)}}, {cache: {ttl: 1h}}]
          production:
            origin: { mock: {} }
            chain: [{tag: {name: prod}}, {cache: {ttl: 30m}}]
          broken:
            origin: { mock: {} }
            chain: [tga, {cache: {ttl: soon}}]
        """
    }

    static let names = ["development", "staging", "production", "broken"]

    @Test("a switch serves the other environment on the same listener; health, the index and ?environment= follow it")
    func switches() async throws {
        try await withVeneer(yaml: Self.yaml(), registry: extendedRegistry) { (veneer: RunningVeneer) async throws in
            #expect(try await veneer.request("GET", "/posts/1").header("X-Trail") == "dev")
            guard case .switched(let generation, let previous, let warnings) = await veneer.instance.switchEnvironment(to: "staging") else {
                Issue.record("the switch should succeed")
                return
            }
            #expect(generation.number == 2 && generation.spec.name == "staging" && previous == "development")
            #expect(warnings.isEmpty, "the listen address is the test's --listen for every environment")
            #expect(veneer.instance.servingEnvironment == "staging")
            #expect(try await veneer.request("GET", "/posts/1").header("X-Trail") == "staging")
            let health = try await veneer.request("GET", "/-/health")
            #expect(health.json?["environment"] as? String == "staging")
            #expect(health.json?["chain_generation"] as? Int == 2)
            #expect(health.json?["last_reload_error"] == nil)
            #expect(try await veneer.request("GET", "/-/").json?["environment"] as? String == "staging")
            #expect(try await veneer.request("GET", "/-/health?environment=development").status == 409)
            #expect(try await veneer.request("GET", "/-/health?environment=staging").status == 200)
            let listed = try await veneer.request("GET", "/-/environment")
            #expect(listed.json?["environment"] as? String == "staging")
            #expect(listed.json?["environments"] as? [String] == Self.names)
            #expect(listed.json?["switchable"] as? Bool == true)
            #expect(veneer.instance.environments == Self.names)
            let metrics = try await veneer.request("GET", "/-/metrics").text
            #expect(metrics.contains(#"veneer_environment_info{environment="staging"} 1"#))
            #expect(!metrics.contains(#"environment="development""#))
        }
    }

    @Test("a cache with the same options keeps its entries across a switch")
    func carriesSameOptions() async throws {
        try await withVeneer(yaml: Self.yaml(), registry: extendedRegistry) { (veneer: RunningVeneer) async throws in
            #expect(try await veneer.request("GET", "/posts/1").header("Cache-Status")?.contains("stored") == true)
            guard case .switched(let generation, _, _) = await veneer.instance.switchEnvironment(to: "staging") else {
                Issue.record("the switch should succeed")
                return
            }
            #expect(generation.carried.keys.map(\.description).contains("cache#0"))
            let after = try await veneer.request("GET", "/posts/1")
            #expect(after.header("X-Trail") == "staging")
            #expect(after.header("Cache-Status")?.hasPrefix("veneer; hit") == true, "\(after.header("Cache-Status") ?? "none")")
        }
    }

    @Test("a cache whose options differ starts empty after a switch")
    func freshWithOtherOptions() async throws {
        try await withVeneer(yaml: Self.yaml(), registry: extendedRegistry) { (veneer: RunningVeneer) async throws in
            _ = try await veneer.request("GET", "/posts/1")
            #expect(try await veneer.request("GET", "/posts/1").header("Cache-Status")?.hasPrefix("veneer; hit") == true)
            guard case .switched(let generation, _, _) = await veneer.instance.switchEnvironment(to: "production") else {
                Issue.record("the switch should succeed")
                return
            }
            #expect(generation.carried.released().count >= 1, "the development cache is released")
            let after = try await veneer.request("GET", "/posts/1")
            #expect(after.header("X-Trail") == "prod")
            #expect(after.header("Cache-Status")?.contains("stored") == true, "\(after.header("Cache-Status") ?? "none")")
        }
    }

    @Test("a reload after a switch re-reads the environment now serving, not the one started with")
    func reloadAfterSwitch() async throws {
        let box = YAMLBox(Self.yaml())
        try await withVeneer(yaml: "", registry: extendedRegistry, yamlProvider: { box.value }) { (veneer: RunningVeneer) async throws in
            _ = await veneer.instance.switchEnvironment(to: "staging")
            box.set(Self.yaml(stagingTag: "staging2"))
            let reloaded = try await veneer.instance.reload().get()
            #expect(reloaded.number == 3 && reloaded.spec.name == "staging")
            #expect(try await veneer.request("GET", "/posts/1").header("X-Trail") == "staging2")
        }
    }

    @Test("a request in flight during a switch finishes on the chain it entered")
    func inFlight() async throws {
        // The mock's latency runs on this clock: the request stays in flight until the test moves it.
        let clock = ManualClock()
        try await withVeneer(yaml: Self.yaml(latency: "500ms"), registry: extendedRegistry, clock: clock) { (veneer: RunningVeneer) async throws in
            async let slow = veneer.request("GET", "/posts")
            try await eventually("the slow request is in the chain") { veneer.chain.generation.requestsInFlight > 0 }
            _ = await veneer.instance.switchEnvironment(to: "staging")
            #expect(try await veneer.request("GET", "/posts").header("X-Trail") == "staging")
            clock.advance(by: .seconds(1))
            let answered = try await slow
            #expect(answered.status == 200 && answered.header("X-Trail") == "dev")
        }
    }

    @Test("a switch to an environment without record and back, with a recorded request in flight, keeps one writer on the file: it stays valid HAR with every entry")
    func recordRoundTrip() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let gate = Latch()
        try await withTestUpstream({ request in
            if request.target == "/posts/1" { await gate.wait() }
            return .json(#"{"id":1,"title":"t","body":"b"}"#)
        }) { (upstream: TestUpstream) async throws in
            // The file spelled two ways: one file, one writer.
            let yaml = """
                environments:
                  recording:
                    origin: { upstream: { url: "\(upstream.url)" } }
                    chain: [{ record: { file: \(directory)/staging.har } }]
                  plain:
                    origin: { upstream: { url: "\(upstream.url)" } }
                  again:
                    origin: { upstream: { url: "\(upstream.url)" } }
                    chain: [{ record: { file: \(directory)/./x/../staging.har, max_file_size: 1MB } }]
                """
            try FileManager.default.createDirectory(atPath: directory + "/x", withIntermediateDirectories: true)
            try await withVeneer(yaml: yaml, environment: "recording") { (veneer: RunningVeneer) async throws in
                async let slow = veneer.request("GET", "/posts/1")
                try await eventually("the recorded request reached the upstream") { upstream.count > 0 }
                for target in ["plain", "recording", "plain", "again"] {
                    guard case .switched = await veneer.instance.switchEnvironment(to: target) else {
                        Issue.record("the switch to \(target) should succeed")
                        return
                    }
                    if target != "plain" { #expect(try await veneer.request("GET", "/posts/2").status == 200) }
                }
                gate.open()
                #expect(try await slow.status == 200)
                let data = try #require(FileManager.default.contents(atPath: directory + "/staging.har"))
                let har = try JSONSerialization.jsonObject(with: data) as? [String: Any]
                let entries = (har?["log"] as? [String: Any])?["entries"] as? [[String: Any]]
                #expect(entries?.count == 3, "\(String(decoding: data, as: UTF8.self))")
                #expect(String(decoding: data.suffix(5), as: UTF8.self) == "\n]}}\n")
            }
        }
    }

    @Test("a target that does not validate changes nothing and reports every error; the reload status stays as it was")
    func invalidTarget() async throws {
        try await withVeneer(yaml: Self.yaml(), registry: extendedRegistry) { (veneer: RunningVeneer) async throws in
            guard case .failed(let error) = await veneer.instance.switchEnvironment(to: "broken") else {
                Issue.record("the switch should fail")
                return
            }
            #expect(error.diagnostics.count == 2)  // unknown decorator, a ttl that is no duration
            #expect(veneer.instance.servingEnvironment == "development" && veneer.chain.generation.number == 1)
            #expect(try await veneer.request("GET", "/posts/1").header("X-Trail") == "dev")
            let health = try await veneer.request("GET", "/-/health")
            #expect(health.json?["last_reload_error"] == nil)
            #expect(health.json?["environment"] as? String == "development")

            let answer = try await veneer.request("POST", "/-/environment", headers: [("Content-Type", "application/json")],
                                                  body: #"{"environment":"broken"}"#)
            #expect(answer.status == 422)
            #expect(answer.json?["status"] as? String == "failed" && answer.json?["environment"] as? String == "development")
            let errors = answer.json?["errors"] as? [String] ?? []
            #expect(errors.count == 2)
            #expect(errors.contains { $0.contains("unknown decorator 'tga'") })
            #expect(errors.contains { $0.contains(#""soon" is not a duration"#) })
        }
    }

    @Test("an unknown environment is 404 with the names of the file; the one serving is 200 with nothing rebuilt")
    func unknownAndSame() async throws {
        try await withVeneer(yaml: Self.yaml(), registry: extendedRegistry) { (veneer: RunningVeneer) async throws in
            guard case .unknown(let names) = await veneer.instance.switchEnvironment(to: "stagign") else {
                Issue.record("the environment is unknown")
                return
            }
            #expect(names == Self.names)
            let unknown = try await veneer.request("POST", "/-/environment", body: #"{"environment":"stagign"}"#)
            #expect(unknown.status == 404 && unknown.errorCode == "unknown_environment")
            #expect(unknown.json?["environments"] as? [String] == Self.names)

            let same = try await veneer.request("POST", "/-/environment", body: #"{"environment":"development"}"#)
            #expect(same.status == 200 && same.json?["status"] as? String == "unchanged")
            #expect(veneer.chain.generation.number == 1)
        }
    }

    @Test("POST /-/environment takes JSON and an HTML form; a browser's form goes back to /-/ with 303")
    func adminForms() async throws {
        try await withVeneer(yaml: Self.yaml(), registry: extendedRegistry) { (veneer: RunningVeneer) async throws in
            let json = try await veneer.request("POST", "/-/environment", headers: [("Content-Type", "application/json")],
                                                body: #"{"environment":"staging"}"#)
            #expect(json.status == 200)
            #expect(json.json?["status"] as? String == "switched" && json.json?["previous"] as? String == "development")
            #expect(json.json?["chain_generation"] as? Int == 2)
            #expect((json.json?["carried_over"] as? [String])?.contains("cache#0") == true)

            let browser = try await veneer.request("POST", "/-/environment",
                                                   headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "text/html,*/*;q=0.8")],
                                                   body: "environment=production")
            #expect(browser.status == 303 && browser.header("Location") == "/-/")
            #expect(veneer.instance.servingEnvironment == "production")

            let program = try await veneer.request("POST", "/-/environment", headers: [("Content-Type", "application/x-www-form-urlencoded")],
                                                   body: "other=1&environment=development")
            #expect(program.status == 200 && program.json?["environment"] as? String == "development")

            let nameless = try await veneer.request("POST", "/-/environment", body: #"{"env":"staging"}"#)
            #expect(nameless.status == 400 && nameless.errorCode == "bad_request")
            #expect(try await veneer.request("DELETE", "/-/environment").status == 405)
            let index = try await veneer.request("GET", "/-/")
            let paths = (index.json?["endpoints"] as? [[String: Any]] ?? []).compactMap { $0["path"] as? String }
            #expect(paths.contains("/-/environment"))
        }
    }

    @Test("under systemd a switch is refused with what to do instead")
    func refusedUnderSystemd() async throws {
        try await withVeneer(yaml: Self.yaml(), variables: ["INVOCATION_ID": "0123abcd"], registry: extendedRegistry) { (veneer: RunningVeneer) async throws in
            guard case .refused(let message) = await veneer.instance.switchEnvironment(to: "staging") else {
                Issue.record("the switch should be refused")
                return
            }
            #expect(message == "the instance name is the environment under systemd: systemctl start veneer@staging")
            let answer = try await veneer.request("POST", "/-/environment", body: #"{"environment":"staging"}"#)
            #expect(answer.status == 409 && answer.errorCode == "managed_by_systemd")
            let listed = try await veneer.request("GET", "/-/environment")
            #expect(listed.json?["switchable"] as? Bool == false)
            #expect(veneer.chain.generation.number == 1)
        }
    }

    @Test("the listeners stay where they are: the new environment serves on them, and must suit them (allowed_hosts)")
    func keepsListeners() throws {
        let document = try ConfigDocument(source: ConfigSource(file: "t.yaml", text: """
            environments:
              lan: { listen: "0.0.0.0:8080", allowed_hosts: [devbox.test], origin: { mock: {} } }
              local: { listen: "127.0.0.1:8081", admin: { listen: "127.0.0.1:9091" }, origin: { mock: {} } }
              named: { listen: "127.0.0.1:8082", allowed_hosts: [devbox.test], origin: { mock: {} } }
            """))
        func spec(_ name: String) throws -> EnvironmentSpec {
            try document.environment(name, registry: .standard, variables: [:], workingDirectory: "/")
        }
        let (local, warnings) = try VeneerInstance.onListeners(of: spec("named"), spec("local"), action: "a switch")
        #expect(local.listen.description == "127.0.0.1:8082" && local.adminListen == nil)
        #expect(warnings == ["listen addresses cannot change on a switch (still 127.0.0.1:8082); restart to move them"])
        #expect(try VeneerInstance.onListeners(of: spec("lan"), spec("named"), action: "a switch").0.listen.description == "0.0.0.0:8080")
        // A wildcard listener and an environment without allowed_hosts: refused, as `run` refuses it.
        #expect {
            _ = try VeneerInstance.onListeners(of: spec("lan"), spec("local"), action: "a switch")
        } throws: { error in
            let diagnostics = (error as? ConfigError)?.diagnostics ?? []
            return diagnostics.count == 1 && diagnostics[0].path == "environments.local.allowed_hosts"
                && diagnostics[0].message.hasPrefix("the listeners stay until a restart: 0.0.0.0:8080 is reached by names Veneer cannot know")
        }
    }

    @Test("systemd is told by INVOCATION_ID, unless SYSTEMD_EXEC_PID names another process (a shell a service started)")
    func systemdDetection() {
        #expect(!EnvironmentSwitch.isSystemdService(variables: [:], processID: 42))
        #expect(!EnvironmentSwitch.isSystemdService(variables: ["NOTIFY_SOCKET": "/run/systemd/notify"], processID: 42))
        #expect(!EnvironmentSwitch.isSystemdService(variables: ["INVOCATION_ID": ""], processID: 42))
        #expect(EnvironmentSwitch.isSystemdService(variables: ["INVOCATION_ID": "ab12"], processID: 42))
        #expect(EnvironmentSwitch.isSystemdService(variables: ["INVOCATION_ID": "ab12", "SYSTEMD_EXEC_PID": "42"], processID: 42))
        #expect(!EnvironmentSwitch.isSystemdService(variables: ["INVOCATION_ID": "ab12", "SYSTEMD_EXEC_PID": "7"], processID: 42))
    }

    @Test("the request body names the environment as JSON or as a form field", arguments: [
        (#"{"environment":"staging"}"#, nil, EnvironmentSwitch.Request(environment: "staging", isForm: false)),
        (#"{"environment":"staging"}"#, "application/json; charset=utf-8", EnvironmentSwitch.Request(environment: "staging", isForm: false)),
        ("environment=staging", "application/x-www-form-urlencoded", EnvironmentSwitch.Request(environment: "staging", isForm: true)),
        ("csrf=x&environment=my%2Denv+2", "Application/X-WWW-Form-Urlencoded; charset=UTF-8", EnvironmentSwitch.Request(environment: "my-env 2", isForm: true)),
        ("environment=", "application/x-www-form-urlencoded", nil),
        ("environment=%zz", "application/x-www-form-urlencoded", nil),
        ("environment=staging", nil, nil),
        // curl -d '{"environment":"staging"}' sends JSON under curl's default type, the form one.
        (#"{"environment":"staging"}"#, "application/x-www-form-urlencoded", EnvironmentSwitch.Request(environment: "staging", isForm: false)),
        (#"{"environment":""}"#, "application/x-www-form-urlencoded", nil),
        (#"{"environment":""}"#, "application/json", nil),
        (#"{"environment":3}"#, "application/json", nil),
    ] as [(String, String?, EnvironmentSwitch.Request?)])
    func requestBody(body: String, contentType: String?, expected: EnvironmentSwitch.Request?) {
        #expect(EnvironmentSwitch.request(body: ByteBuffer(string: body), contentType: contentType) == expected)
    }
}
