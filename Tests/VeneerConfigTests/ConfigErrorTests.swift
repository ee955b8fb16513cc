import Testing
import VeneerConfig
import VeneerCore

@Suite("Configuration errors: each with file, line, column and key path, all at once")
struct ConfigErrorTests {
    @Test("a bad duration names its place and how to write one")
    func badDuration() {
        let yaml = """
            version: 1
            environments:
              production:
                origin:
                  upstream: { url: https://api.example.com }
                chain:
                  - latency_log
                  - cache: { ttl: 5 minutes }
            """
        #expect(problems(yaml, environment: "production") == [
            #"veneer.yaml:8:23: environments.production.chain[1].cache.ttl: "5 minutes" is not a duration (use e.g. 30s, 5m, 1h)"#,
        ])
    }

    @Test("an environment with nothing under it is decoded as empty: its missing origin is reported, by check too")
    func emptyEnvironment() throws {
        // Found by the config fuzz target: check passed and `run` crashed on a nil environment.
        let yaml = "environments:\n  development:\n  production:\n    extends: development\n"
        for name in ["development", "production"] {
            #expect(problems(yaml, environment: name).contains { $0.contains("origin") }, "\(name)")
        }
        let document = try ConfigDocument(source: ConfigSource(file: "veneer.yaml", text: yaml))
        #expect(!document.checkAll(registry: testRegistry, variables: [:], workingDirectory: "/srv").isEmpty)
    }

    @Test("unknown keys are errors with a did-you-mean, at the key")
    func unknownKey() {
        let yaml = """
            environments:
              development:
                origin: { mock: {} }
                chain:
                  - cache: { tll: 30s }
                listn: 127.0.0.1:8080
            """
        #expect(problems(yaml) == [
            "veneer.yaml:5:18: environments.development.chain[0].cache.tll: unknown key 'tll' (did you mean 'ttl'?)",
            "veneer.yaml:6:5: environments.development.listn: unknown key 'listn' (did you mean 'listen'?)",
        ])
    }

    @Test("unknown decorator and origin names are errors with a did-you-mean and the known names")
    func unknownNames() {
        let yaml = """
            environments:
              development:
                origin: { mokc: {} }
                chain: [latency_log, cahce]
            """
        #expect(problems(yaml) == [
            "veneer.yaml:3:15: environments.development.origin.mokc: unknown origin 'mokc' (did you mean 'mock'?) (known: mock, upstream)",
            "veneer.yaml:4:26: environments.development.chain[1]: unknown decorator 'cahce' (did you mean 'cache'?) (known: auth_refresh, cache, latency_log)",
        ])
    }

    @Test("every problem is reported in one go, in file order")
    func allAtOnce() {
        let yaml = """
            environments:
              development:
                listen: localhost
                origin: { upstream: { url: https://x, timeout: soon } }
                chain:
                  - cache: { ttl: 1h, max_bytes: lots, max_entries: -5 }
                  - cache: { store: locl }
                resources: [posts, "bad name"]
            """
        let found = problems(yaml)
        #expect(found == [
            #"veneer.yaml:3:13: environments.development.listen: "localhost" is not a listen address (use e.g. 127.0.0.1:8080, [::1]:8080 or unix:/run/veneer/NAME.sock)"#,
            #"veneer.yaml:4:52: environments.development.origin.upstream.timeout: "soon" is not a duration (use e.g. 30s, 5m, 1h)"#,
            #"veneer.yaml:6:38: environments.development.chain[0].cache.max_bytes: "lots" is not a size (use e.g. 512KB, 10MB, 1GB)"#,
            "veneer.yaml:6:57: environments.development.chain[0].cache.max_entries: -5 is out of range (1...1000000)",
            "veneer.yaml:7:25: environments.development.chain[1].cache.store: no store named 'locl' (stores: memory)",
            #"veneer.yaml:8:24: environments.development.resources[1]: "bad name" is not a collection name (letters, digits, '-', '_')"#,
        ])
    }

    @Test("connection limits are checked like every other key: unit, range, at their place")
    func connectionLimits() {
        let yaml = """
            environments:
              development:
                origin: { mock: {} }
                limits:
                  header_timeout: soon
                  body_timeout: 0s
                  output_buffer: 1KB
                  pipeline_depth: 0
                  connections: many
                  header_timeuot: 1s
            """
        #expect(problems(yaml) == [
            #"veneer.yaml:5:23: environments.development.limits.header_timeout: "soon" is not a duration (use e.g. 30s, 5m, 1h)"#,
            "veneer.yaml:6:21: environments.development.limits.body_timeout: 0s is out of range (1ms...1h)",
            "veneer.yaml:7:22: environments.development.limits.output_buffer: 1KB is out of range (4KB...64MB)",
            "veneer.yaml:8:23: environments.development.limits.pipeline_depth: 0 is out of range (1...1024)",
            #"veneer.yaml:9:20: environments.development.limits.connections: "many" is not an integer"#,
            "veneer.yaml:10:7: environments.development.limits.header_timeuot: unknown key 'header_timeuot' (did you mean 'header_timeout'?)",
        ])
    }

    @Test("YAML syntax errors carry libyaml's line and column")
    func syntax() {
        let yaml = "environments:\n  development:\n    origin: { mock: {}\n    chain: []\n"
        let found = problems(yaml)
        #expect(found.count == 1)
        #expect(found.first?.hasPrefix("veneer.yaml:4:") == true)
        #expect(found.first?.contains("YAML syntax error") == true)
    }

    @Test("duplicate keys, a second document and another version are errors")
    func structure() {
        #expect(problems("environments:\n  development:\n    origin: { mock: {} }\n    origin: { mock: {} }\n") == [
            "veneer.yaml:4:5: environments.development.origin: duplicate key 'origin' (first at line 3): keep one of them",
        ])
        #expect(problems("environments: {development: {origin: {mock: {}}}}\n---\nx: 1\n") == [
            "veneer.yaml:2:1: a configuration file holds one YAML document; remove the second one (after '---')",
        ])
        #expect(problems("version: 2\nenvironments: {development: {origin: {mock: {}}}}\n") == [
            "veneer.yaml:1:10: version: version 2 is not supported; this Veneer reads version 1",
        ])
        #expect(problems("environments: {development: {origin: {mock: {}}}}\nenvironmnts: {}\n") == [
            "veneer.yaml:2:1: environmnts: unknown key 'environmnts' (did you mean 'environments'?)",
        ])
    }

    @Test("an environment that does not exist is named with a did-you-mean")
    func unknownEnvironment() {
        let yaml = "environments: {development: {origin: {mock: {}}}, production: {origin: {mock: {}}}}"
        #expect(problems(yaml, environment: "prodution") == [
            "veneer.yaml: no environment 'prodution' (did you mean 'production'?) (defined: development, production)",
        ])
    }

    @Test("an origin is required, and is exactly one of the registered kinds")
    func origin() {
        #expect(problems("environments: {development: {chain: []}}") == [
            "veneer.yaml:1:29: environments.development.origin: required",
        ])
        #expect(problems("environments: {development: {origin: {mock: {}, upstream: {url: 'http://x'}}}}") == [
            "veneer.yaml:1:38: environments.development.origin: an origin is one of: { mock: {...} }, { upstream: {...} }",
        ])
    }

    @Test("chain entries are names or one-key mappings")
    func chainEntries() {
        #expect(problems("environments: {development: {origin: {mock: {}}, chain: [{cache: {}, latency_log: {}}]}}") == [
            "veneer.yaml:1:58: environments.development.chain[0]: a chain entry is a decorator name or a one-key mapping 'name: {options}'",
        ])
    }

    @Test("libyaml's syntax errors are told in the file's terms, with a hint, where the fix goes")
    func syntaxHints() {
        #expect(problems("environments:\n  development:\n\torigin: { mock: {} }\n") == [
            "veneer.yaml:3:1: YAML syntax error: a tab character; YAML indents with spaces only (replace the tab with spaces)",
        ])
        // At the opening quote, not at the end of the file where libyaml noticed.
        #expect(problems("environments:\n  development:\n    listen: \"127.0.0.1:8080\n    origin: { mock: {} }\n") == [
            "veneer.yaml:3:13: YAML syntax error: the quoted text that starts here is never closed (add the closing \")",
        ])
        #expect(problems("environments:\n  development:\n    listen: '127.0.0.1:8080\n") == [
            "veneer.yaml:3:13: YAML syntax error: the quoted text that starts here is never closed (add the closing ')",
        ])
        #expect(problems("environments:\n  development:\n    origin: { mock: {} }\n   chain: []\n") == [
            "veneer.yaml:4:4: YAML syntax error: bad indentation: this line does not line up with the keys of the mapping that starts at line 2, column 3",
        ])
        #expect(problems("environments:\n  development:\n    origin: { mock: {}\n    chain: []\n") == [
            "veneer.yaml:4:5: YAML syntax error: the '{' at line 3, column 13 is not closed: a '}' (or a ',' between entries) is missing",
        ])
        #expect(problems("environments:\n  development:\n    listen: a: b\n") == [
            "veneer.yaml:3:14: YAML syntax error: unexpected ':'; a value that contains ': ' must be quoted, or this line is indented too far",
        ])
    }

    @Test("a duplicate key is named by its key path, at any depth")
    func duplicateKeyPath() {
        let yaml = """
            environments:
              development:
                origin: { mock: {} }
                chain:
                  - cache: { ttl: 30s, ttl: 1m }
            """
        #expect(problems(yaml) == [
            "veneer.yaml:5:28: environments.development.chain[0].cache.ttl: duplicate key 'ttl' (first at line 5): keep one of them",
        ])
    }

    @Test("a name that is another form of a known one gets a did-you-mean too")
    func didYouMeanForms() {
        let yaml = "environments: {development: {origin: {mock: {}}, chain: [caching]}}"
        #expect(problems(yaml) == [
            "veneer.yaml:1:58: environments.development.chain[0]: unknown decorator 'caching' (did you mean 'cache'?) (known: auth_refresh, cache, latency_log)",
        ])
        #expect(Suggestions.closest(to: "latency_logging", in: ["cache", "latency_log"]) == "latency_log")
        #expect(Suggestions.closest(to: "log", in: ["cache", "latency_log", "block_list"]) == nil)
    }

    @Test("an extends cycle is one error, however many environments lead into it")
    func extendsCycleOnce() throws {
        let yaml = """
            environments:
              a: { extends: b, origin: { mock: {} } }
              b: { extends: a }
              c: { extends: a }
            """
        let document = try ConfigDocument(source: ConfigSource(file: "veneer.yaml", text: yaml))
        let found = document.check(only: nil, registry: testRegistry, variables: [:], workingDirectory: "/srv")
        #expect(found.errors.map(\.description) == ["veneer.yaml:2:17: environments.a.extends: 'extends' forms a cycle: a -> b -> a"])
    }

    @Test("a secret file that cannot be read is a warning, not an error; errors and warnings print as editors parse them")
    func unreadableSecretWarns() throws {
        let yaml = """
            environments:
              development:
                origin: { mock: {} }
                chain:
                  - auth_refresh: { token_url: "https://auth.example/token", client_secret_file: /nonexistent/veneer/client-secret }
            """
        let document = try ConfigDocument(source: ConfigSource(file: "veneer.yaml", text: yaml))
        let found = document.check(only: "development", registry: testRegistry, variables: [:], workingDirectory: "/srv")
        #expect(found.errors.isEmpty)
        #expect(found.environments.map(\.name) == ["development"])
        #expect(found.warnings.map { $0.report() } == [
            "veneer.yaml:5:86: warning: environments.development.chain[0].auth_refresh.client_secret_file: secret file /nonexistent/veneer/client-secret does not exist (veneer run reads it when it builds the chain, and stops if it cannot)",
        ])
        #expect(ConfigDiagnostic(mark: SourceMark(file: "a.yaml", line: 3, column: 7), path: "x.y", message: "bad").report() == "a.yaml:3:7: error: x.y: bad")
        #expect(ConfigDiagnostic(mark: nil, path: "", message: "a.yaml: configuration file does not exist").report()
                == "veneer: error: a.yaml: configuration file does not exist")
    }
}
