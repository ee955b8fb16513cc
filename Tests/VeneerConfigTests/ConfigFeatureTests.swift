import Foundation
import Testing
import VeneerConfig
import VeneerCore

@Suite("Configuration features")
struct ConfigFeatureTests {
    @Test("extends merges mappings key by key; lists and scalars replace whole")
    func extendsMerge() throws {
        let yaml = """
            environments:
              production:
                listen: 127.0.0.1:8080
                limits: { request_body: 2MB, response_body: 8MB }
                origin:
                  upstream: { url: https://api.example.com, timeout: 3s }
                chain:
                  - latency_log: { slow: 500ms }
                  - cache: { ttl: 5m }
              staging:
                extends: production
                limits: { request_body: 4MB }
                origin:
                  upstream: { url: https://staging.api.example.com }
                chain:
                  - latency_log
            """
        let staging = try decode(yaml, environment: "staging")
        #expect(staging.listen.description == "127.0.0.1:8080")
        #expect(staging.limits.requestBody == 4 << 20)
        #expect(staging.limits.responseBody == 8 << 20)
        #expect(staging.origin.summary["url"]?.stringValue == "https://staging.api.example.com")
        #expect(staging.origin.summary["timeout"]?.stringValue == "3s")
        #expect(staging.chain.map(\.name) == ["latency_log"])
    }

    @Test("connection limits have the documented defaults, and are shown with the environment")
    func connectionLimits() throws {
        let defaults = try decode("environments: {development: {origin: {mock: {}}}}").limits
        #expect(defaults.headerTimeout == .seconds(10) && defaults.bodyTimeout == .seconds(30))
        #expect(defaults.outputBuffer == 256 << 10 && defaults.pipelineDepth == 16 && defaults.connections == 10_000)
        let set = try decode("""
            environments:
              development:
                origin: { mock: {} }
                limits: { header_timeout: 2s, body_timeout: 5s, output_buffer: 1MB, pipeline_depth: 4, connections: 500 }
            """)
        #expect(set.limits.headerTimeout == .seconds(2) && set.limits.bodyTimeout == .seconds(5))
        #expect(set.limits.outputBuffer == 1 << 20 && set.limits.pipelineDepth == 4 && set.limits.connections == 500)
        let shown = set.summary["limits"]
        #expect(shown?["header_timeout"]?.stringValue == "2s" && shown?["output_buffer"]?.stringValue == "1MB")
        #expect(shown?["connections"] == .int(500))
    }

    @Test("extends cycles and unknown parents are errors")
    func extendsErrors() {
        let cycle = """
            environments:
              a: { extends: b, origin: { mock: {} } }
              b: { extends: c }
              c: { extends: a }
            """
        #expect(problems(cycle, environment: "a") == ["veneer.yaml:2:17: environments.a.extends: 'extends' forms a cycle: a -> b -> c -> a"])
        // From whichever environment it is reached, the same cycle is the same error.
        #expect(problems(cycle, environment: "c") == ["veneer.yaml:2:17: environments.a.extends: 'extends' forms a cycle: a -> b -> c -> a"])
        #expect(problems("environments: {a: {extends: prod, origin: {mock: {}}}, production: {}}", environment: "a") == [
            "veneer.yaml:1:29: environments.a.extends: no environment 'prod' to extend (did you mean 'production'?)",
        ])
    }

    @Test("${VAR} and ${VAR:-default} interpolate the environment; unset variables are errors")
    func interpolation() throws {
        let yaml = """
            environments:
              development:
                listen: 127.0.0.1:${PORT:-8080}
                origin: { upstream: { url: "${UPSTREAM}/v1", timeout: "${TIMEOUT:-2s}" } }
                chain: [{ latency_log: { label: "$${literal}" } }]
            """
        let spec = try decode(yaml, variables: ["UPSTREAM": "http://127.0.0.1:9000", "PORT": "9090"])
        #expect(spec.listen.port == 9090)
        #expect(spec.origin.summary["url"]?.stringValue == "http://127.0.0.1:9000/v1")
        #expect(spec.origin.summary["timeout"]?.stringValue == "2s")
        #expect(spec.chain[0].summary["label"]?.stringValue == "${literal}")
        #expect(problems(yaml) == [
            "veneer.yaml:4:32: environments.development.origin.upstream.url: environment variable UPSTREAM is not set (set it, or write ${UPSTREAM:-default})",
        ])
    }

    @Test("secrets come inline or from *_file, never both, and are redacted in summaries")
    func secrets() throws {
        let inline = """
            environments:
              development:
                origin: { mock: {} }
                chain: [{ auth_refresh: { token_url: "https://auth/x", client_secret: s3cr3t } }]
            """
        let spec = try decode(inline)
        #expect(spec.chain[0].summary["client_secret"]?.stringValue == "<redacted>")
        #expect(!spec.summary.text.contains("s3cr3t"))
        let fromFile = inline.replacingOccurrences(of: "client_secret: s3cr3t", with: "client_secret_file: creds/secret")
        #expect(try decode(fromFile).chain[0].summary["client_secret_file"]?.stringValue == "/srv/creds/secret")
        let both = inline.replacingOccurrences(of: "client_secret: s3cr3t", with: "client_secret: a, client_secret_file: /b")
        #expect(problems(both) == [
            "veneer.yaml:4:98: environments.development.chain[0].auth_refresh.client_secret_file: give either 'client_secret' or 'client_secret_file', not both",
        ])
    }

    @Test("a secret file is read when revealed, without its trailing newline")
    func secretFile() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("veneer-secret-\(UInt32.random(in: 0...UInt32.max))").path
        try "hunter2\n".write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(try Secret.file(path).reveal() == "hunter2")
        #expect(Secret.file(path).description == "file:\(path)")
        #expect(Secret.value("x").description == "<redacted>")
        #expect(throws: SecretError.self) { try Secret.file(path + ".missing").reveal() }
    }

    @Test("anchors, aliases and merge keys work")
    func anchors() throws {
        let yaml = """
            defaults: &none {}
            environments:
              development:
                origin: { mock: {} }
                chain:
                  - cache: &cache { ttl: 30s, max_entries: 10 }
                  - cache: { <<: *cache, ttl: 1m }
                  - cache: *cache
            """
        // 'defaults' is not a top-level key: merge keys and aliases are only useful inside.
        #expect(problems(yaml).first?.contains("unknown key 'defaults'") == true)
        let spec = try decode(yaml.replacingOccurrences(of: "defaults: &none {}\n", with: ""))
        #expect(spec.chain.map { $0.summary["ttl"]?.stringValue } == ["30s", "1m", "30s"])
        #expect(spec.chain.map { $0.summary["max_entries"]?.intValue } == [10, 10, 10])
    }

    @Test("an alias bomb stops at a node limit instead of eating memory")
    func aliasBomb() {
        var yaml = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
        for level in 1...8 {
            yaml += "a\(level): &a\(level) [" + Array(repeating: "*a\(level - 1)", count: 10).joined(separator: ", ") + "]\n"
        }
        yaml += "environments: {development: {origin: {mock: {}}}}\nstate_dir: /tmp\n"
        let found = problems(yaml)
        #expect(found.contains { $0.contains("more than 200000 nodes") })
        // Refused with that one error: no "duplicate key ''" for each key read after it.
        #expect(found.count == 1, "\(found)")
        #expect(!found.contains { $0.contains("duplicate key") })
    }

    @Test("a recursive alias is refused with one error, however long its keys (found by fuzzing: an error per node past the depth limit, each with its whole path, took gigabytes)")
    func recursiveAlias() {
        let long = String(repeating: "k", count: 1000)  // libyaml takes simple keys up to 1024 characters
        let yaml = "base: &b { <<: *b, \(long): *b, chain: *b }\nenvironments: {development: {origin: {mock: {}}}}\n"
        let found = problems(yaml)
        #expect(found.count == 1, "\(found.count) problems")
        #expect(found.first?.contains("nesting deeper than 64 levels") == true || found.first?.contains("more than 200000 nodes") == true)
    }

    @Test("top-level keys that start with x- are the file's own: a place for anchors, ignored (as in Compose files)")
    func extensionKeys() throws {
        let yaml = """
            x-defaults: &defaults
              origin: { mock: {} }
              chain: [{ cache: { ttl: 42s } }]
            x-anything: [1, 2, { deep: true }]
            environments:
              development:
                <<: *defaults
                listen: 127.0.0.1:9000
            """
        let spec = try decode(yaml)
        #expect(spec.chain.map(\.name) == ["cache"] && spec.listen.port == 9000)
        #expect(problems("xdefaults: 1\n" + yaml).contains { $0.contains("unknown key 'xdefaults'") }, "only x- is the file's own")
    }

    @Test("durations and sizes", arguments: [("250ms", 0.25), ("30s", 30), ("5m", 300), ("1h", 3600), ("1h30m", 5400), ("0", 0), ("1.5s", 1.5)])
    func durations(_ text: String, _ seconds: Double) {
        #expect(Units.duration(text)?.seconds == seconds)
    }

    @Test("sizes in bytes with binary units", arguments: [("512KB", 524_288), ("10MB", 10_485_760), ("1GB", 1_073_741_824), ("100", 100), ("2k", 2048)])
    func sizes(_ text: String, _ bytes: Int) {
        #expect(Units.size(text) == bytes)
        #expect(Units.size("ten") == nil && Units.duration("5 minutes") == nil && Units.duration("5") == nil)
    }

    @Test("stores: sqlite paths resolve against state_dir; references are checked; unused stores are not required")
    func stores() throws {
        let yaml = """
            state_dir: /var/lib/veneer
            stores:
              local: { sqlite: veneer.sqlite }
              shared: { postgres: "${DATABASE_URL}" }
            environments:
              development:
                origin: { mock: {} }
                chain: [{ cache: { store: local } }]
            """
        let spec = try decode(yaml)
        #expect(spec.stores == ["local": .sqlite(path: "/var/lib/veneer/veneer.sqlite")])
        #expect(spec.stateDirectory == "/var/lib/veneer")
        let document = try ConfigDocument(source: ConfigSource(file: "veneer.yaml", text: yaml))
        #expect(document.checkAll(registry: testRegistry, variables: [:], workingDirectory: "/").map(\.description) == [
            "veneer.yaml:4:23: stores.shared.postgres: environment variable DATABASE_URL is not set (set it, or write ${DATABASE_URL:-default})",
        ])
    }

    @Test("resources: posts by default; other collections with integer or string ids")
    func resources() throws {
        #expect(try decode("environments: {development: {origin: {mock: {}}}}").resources == [.posts])
        let spec = try decode("environments: {development: {origin: {mock: {}}, resources: [posts, {name: comments, id: string}, users]}}")
        #expect(spec.resources == [.posts, Resource(name: "comments", kind: .string), Resource(name: "users", kind: .integer)])
    }

    @Test("resources: `body: stream` declares a collection whose request bodies stream; a bad value, or posts, is an error at its line and column")
    func streamedBodies() throws {
        let spec = try decode("environments: {development: {origin: {mock: {}}, resources: [posts, {name: uploads, id: string, body: stream}, {name: files, body: whole}]}}")
        #expect(spec.resources.map(\.streamsBodies) == [false, true, false])
        let yaml = """
            environments:
              development:
                origin: { mock: {} }
                resources: [{ name: uploads, body: streamed }, { name: posts, body: stream }]
            """
        let document = try ConfigDocument(source: ConfigSource(file: "veneer.yaml", text: yaml))
        #expect(document.checkAll(registry: testRegistry, variables: [:], workingDirectory: "/").map(\.description) == [
            #"veneer.yaml:4:40: environments.development.resources[0].body: "streamed" is not one of whole, stream (did you mean 'stream'?)"#,
            "veneer.yaml:4:73: environments.development.resources[1].body: posts bodies are validated, so they are read whole",
        ])
    }

    @Test("`body: stream` in a chain that reads bodies whole anyway (record, the mock origin) is a warning at its line and column, naming the reader; elsewhere none")
    func streamedBodiesReadWhole() throws {
        var registry = testRegistry
        registry.register(DecoratorFactory(
            name: "record", summary: "record", options: [OptionDoc("file", "file", "file")], readsRequestBodies: true,
            decode: { mapping, _ in mapping.string("file") },
            make: { _, inner, _ in inner }))
        func warnings(_ yaml: String) throws -> [String] {
            let document = try ConfigDocument(source: ConfigSource(file: "veneer.yaml", text: yaml))
            let found = document.check(only: nil, registry: registry, variables: [:], workingDirectory: "/")
            #expect(found.errors.isEmpty)
            return found.warnings.map { $0.report() }
        }
        let found = try warnings("""
            environments:
              development:
                origin: { upstream: { url: "http://127.0.0.1:9" } }
                resources: [posts, { name: uploads, body: stream }, { name: files, body: whole }]
                chain: [latency_log, { record: { file: a.har } }]
              mocked:
                origin: { mock: {} }
                resources: [{ name: uploads, body: stream }]
              production:
                origin: { upstream: { url: "http://127.0.0.1:9" } }
                resources: [posts, { name: uploads, body: stream }]
                chain: [latency_log]
            """)
        #expect(found == [
            "veneer.yaml:4:47: warning: environments.development.resources[1].body: bodies are read whole anyway (up to limits.request_body): record reads request bodies whole, so none streams in this chain",
            "veneer.yaml:8:40: warning: environments.mocked.resources[0].body: bodies are read whole anyway (up to limits.request_body): mock reads request bodies whole, so none streams in this chain",
        ])
        // What `veneer run` logs: the environment's own warnings.
        let document = try ConfigDocument(source: ConfigSource(file: "veneer.yaml", text: "environments: {development: {origin: {mock: {}}, resources: [{name: uploads, body: stream}]}}"))
        let spec = try document.environment("development", registry: registry, variables: [:], workingDirectory: "/")
        #expect(spec.warnings.map { $0.report() } == [
            "veneer.yaml:1:84: warning: environments.development.resources[0].body: bodies are read whole anyway (up to limits.request_body): mock reads request bodies whole, so none streams in this chain",
        ])
    }

    @Test("the default label of a decorator is its position")
    func position() throws {
        let spec = try decode("environments: {development: {origin: {mock: {}}, chain: [latency_log, cache, {latency_log: {label: inner}}]}}")
        #expect(spec.chain.map { $0.summary["label"]?.stringValue } == ["0", nil, "inner"])
    }
}
