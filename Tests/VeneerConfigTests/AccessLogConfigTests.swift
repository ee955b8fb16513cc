import Testing
import VeneerConfig
import VeneerCore

@Suite("access_log in the configuration")
struct AccessLogConfigTests {
    @Test("off by default; stdout; a path resolved against the working directory; shown with the environment")
    func destinations() throws {
        #expect(try decode("environments: {development: {origin: {mock: {}}}}").accessLog == nil)
        #expect(try decode("environments: {development: {origin: {mock: {}}, access_log: off}}").accessLog == nil)
        #expect(try decode("environments: {development: {origin: {mock: {}}, access_log: stdout}}").accessLog == .standardOutput)
        let spec = try decode("environments: {development: {origin: {mock: {}}, access_log: /var/log/veneer/access.log}}")
        #expect(spec.accessLog == .file("/var/log/veneer/access.log"))
        #expect(spec.summary["access_log"]?.stringValue == "/var/log/veneer/access.log")
        #expect(try decode("environments: {development: {origin: {mock: {}}, access_log: logs/a.log}}").accessLog == .file("/srv/logs/a.log"))
    }

    @Test("an empty value or a mapping is an error at its place")
    func invalid() {
        #expect(problems("environments: {development: {origin: {mock: {}}, access_log: ''}}").contains { $0.contains("access_log") })
        #expect(problems("environments: {development: {origin: {mock: {}}, access_log: {file: x}}}").contains { $0.contains("access_log") })
    }
}
