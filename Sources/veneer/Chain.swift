import ArgumentParser
import Foundation
import VeneerConfig
import VeneerCore
import VeneerRuntime

struct Chain: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the resolved environment: listen address, origin and chain with their options (secrets redacted).")

    @OptionGroup var options: ConfigOptions

    @Flag(help: "Print JSON instead of text.")
    var json = false

    func run() throws {
        let spec = try options.spec()
        if json {
            print(spec.summary.prettyText())
            return
        }
        print("environment  \(spec.name)  (\(spec.configFile))")
        print("listen       \(spec.listeners.map(\.description).joined(separator: ", "))")
        print("admin        \(spec.adminListen.map { "\($0)/-/" } ?? "/-/ on the same listener, loopback clients only")")
        print("resources    \(spec.resources.map(\.description).joined(separator: ", "))")
        print("state_dir    \(spec.stateDirectory)")
        print("trace        \(spec.trace ? "on (answers through the chain carry Server-Timing)" : "off")")
        for name in spec.stores.keys.sorted() { print("store        \(name): \(spec.stores[name]!)") }
        print("chain (outermost first; the first sees the request first and the response last):")
        for decorator in spec.chain {
            print("  \(decorator.site.index + 1). \(decorator.name)\(Self.options(decorator.summary))")
        }
        print("  -> origin \(spec.origin.name)\(Self.options(spec.origin.summary))")
    }

    static func options(_ summary: JSONValue) -> String {
        guard let members = summary.objectMembers, !members.isEmpty else { return "" }
        return "  " + members.map { key, value in
            if case .string(let text) = value { return "\(key)=\(text)" }
            return "\(key)=\(value.text)"
        }.joined(separator: " ")
    }
}
