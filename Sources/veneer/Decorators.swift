import ArgumentParser
import VeneerConfig
import VeneerRuntime

struct Decorators: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List the registered decorators and origins with their options.")

    func run() {
        let registry = Registry.standard
        print("Decorators (chain entries: a bare name, or 'name: {options}'):")
        for name in registry.decoratorNames {
            let factory = registry.decorators[name]!
            print("\n  \(name) — \(factory.summary)")
            Self.printOptions(factory.options)
        }
        print("\nOrigins ('origin: {name: {options}}'):")
        for name in registry.originNames {
            let factory = registry.origins[name]!
            print("\n  \(name) — \(factory.summary)")
            Self.printOptions(factory.options)
        }
    }

    static func printOptions(_ options: [OptionDoc]) {
        let width = options.map { $0.name.count + ($0.isSecret ? 6 : 0) }.max() ?? 0
        for option in options {
            let name = option.isSecret ? "\(option.name)[_file]" : option.name
            let padded = name + String(repeating: " ", count: max(0, width - name.count))
            let defaultText = option.defaultValue.map { " [\($0)]" } ?? ""
            print("      \(padded)  \(option.type): \(option.summary)\(defaultText)")
        }
    }
}
