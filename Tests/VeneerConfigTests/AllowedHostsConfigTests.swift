import Testing
import VeneerConfig
import VeneerCore

@Suite("allowed_hosts and allowed_origins in the configuration")
struct AllowedHostsConfigTests {
    @Test("names are kept in lower case with their port; origins as written; both shown with the environment")
    func values() throws {
        let spec = try decode(#"environments: {development: {origin: {mock: {}}, allowed_hosts: [Veneer.Test, "other.test:8443", "[::1]:80"], "#
                              + #"allowed_origins: ["HTTP://Localhost:3000"]}}"#)
        #expect(spec.allowedHosts == ["veneer.test", "other.test:8443", "[::1]:80"])
        #expect(spec.allowedOrigins == ["HTTP://Localhost:3000"])
        #expect(spec.summary["allowed_hosts"] == .array([.string("veneer.test"), .string("other.test:8443"), .string("[::1]:80")]))
    }

    @Test("a wildcard, a pattern or an origin with a path is an error at its place")
    func invalid() {
        let found = problems(#"environments: {development: {origin: {mock: {}}, allowed_hosts: ["*.test", "0.0.0.0"], allowed_origins: ["http://a/b"]}}"#)
        #expect(found.count == 3 && found.allSatisfy { $0.contains("environments.development.allowed_") })
    }

    @Test("a wildcard or non-loopback listen host needs allowed_hosts; loopback names do not")
    func needsAllowedHosts() {
        for host in ["0.0.0.0", "::", "192.0.2.1", "veneer.lan"] { #expect(EnvironmentSpec.needsAllowedHosts(host), "\(host)") }
        for host in ["127.0.0.1", "::1", "localhost", "LocalHost"] { #expect(!EnvironmentSpec.needsAllowedHosts(host), "\(host)") }
    }
}
