import Testing
import VeneerConfig
import VeneerCore

@Suite("trace in the configuration")
struct TraceConfigTests {
    @Test("off by default; true or false; inherited through extends and overridden; shown with the environment")
    func values() throws {
        let plain = try decode("environments: {development: {origin: {mock: {}}}}")
        #expect(!plain.trace && plain.summary["trace"] == .bool(false))
        let on = try decode("environments: {development: {origin: {mock: {}}, trace: true}}")
        #expect(on.trace && on.summary["trace"] == .bool(true))
        let yaml = """
            environments:
              base: { origin: { mock: {} }, trace: true }
              inherits: { extends: base }
              quiet: { extends: base, trace: false }
            """
        #expect(try decode(yaml, environment: "inherits").trace)
        #expect(try !decode(yaml, environment: "quiet").trace)
    }

    @Test("anything but true or false is an error at its place, with the key path")
    func invalid() {
        #expect(problems("environments: {development: {origin: {mock: {}}, trace: yes}}")
                == [#"veneer.yaml:1:57: environments.development.trace: "yes" is not true or false"#])
        #expect(problems("environments: {development: {origin: {mock: {}}, trace: {server_timing: true}}}").first?
            .contains("environments.development.trace") == true)
    }
}
