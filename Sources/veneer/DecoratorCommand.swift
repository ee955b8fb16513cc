import ArgumentParser
import Logging
import VeneerConfig
import VeneerRuntime

/// The commands the registered decorators add (``CommandLineAction``: `veneer purge`, `veneer
/// unblock`), known here only through ``Registry/commands``. ArgumentParser knows a command by
/// its type, so each offered command takes a slot: one generic command over a slot's index,
/// whose name, help and operand come from the registry when the command line is parsed.
enum OfferedCommands {
    /// What the registry offers, in name order.
    static let offered = Registry.standard.commands

    /// One command type per offered command.
    static var types: [any ParsableCommand.Type] {
        let slots: [any ParsableCommand.Type] = [
            DecoratorCommand<Slot0>.self, DecoratorCommand<Slot1>.self, DecoratorCommand<Slot2>.self, DecoratorCommand<Slot3>.self,
            DecoratorCommand<Slot4>.self, DecoratorCommand<Slot5>.self, DecoratorCommand<Slot6>.self, DecoratorCommand<Slot7>.self,
        ]
        precondition(offered.count <= slots.count, "the decorators offer \(offered.count) commands: add slots for them")
        return Array(slots.prefix(offered.count))
    }
}

/// A slot's index in ``OfferedCommands/offered``.
protocol CommandSlot {
    static var index: Int { get }
}

enum Slot0: CommandSlot { static let index = 0 }
enum Slot1: CommandSlot { static let index = 1 }
enum Slot2: CommandSlot { static let index = 2 }
enum Slot3: CommandSlot { static let index = 3 }
enum Slot4: CommandSlot { static let index = 4 }
enum Slot5: CommandSlot { static let index = 5 }
enum Slot6: CommandSlot { static let index = 6 }
enum Slot7: CommandSlot { static let index = 7 }

/// The command in slot `Slot`: its operand (or `--all`, where the command takes it), the
/// configuration options, and the work, which the runtime runs (``VeneerRuntime/DecoratorCommands``).
struct DecoratorCommand<Slot: CommandSlot>: AsyncParsableCommand {
    static var offered: (action: CommandLineAction, decorator: DecoratorFactory) { OfferedCommands.offered[Slot.index] }

    static var configuration: CommandConfiguration {
        let action = offered.action
        return CommandConfiguration(commandName: action.name, abstract: action.abstract, discussion: action.discussion)
    }

    @Argument(help: ArgumentHelp(DecoratorCommand<Slot>.offered.action.operand.help, valueName: DecoratorCommand<Slot>.offered.action.operand.name))
    var operand: String?

    @Flag(help: ArgumentHelp(DecoratorCommand<Slot>.offered.action.operand.allHelp ?? "",
                             visibility: DecoratorCommand<Slot>.offered.action.operand.allHelp == nil ? .private : .default))
    var all = false

    @OptionGroup var options: ConfigOptions

    func validate() throws {
        let expected = Self.offered.action.operand
        if expected.allHelp == nil {
            if all { throw ValidationError("\(Self.offered.action.name) takes no --all") }
            guard operand != nil else { throw ValidationError("give a \(expected.name.uppercased())") }
        } else {
            guard (operand == nil) != !all else { throw ValidationError("give a \(expected.name.uppercased()) or --all (not both)") }
        }
    }

    func run() async throws {
        let spec = try options.spec()
        var logger = Logger(label: "veneer.\(Self.offered.action.name)")
        logger.logLevel = .warning
        let outcome = try await DecoratorCommands.run(Self.offered.action, of: Self.offered.decorator, spec: spec,
                                                                   operand: all ? nil : operand, logger: logger)
        switch outcome.kind {
        case .done:
            print(outcome.message)
        case .failed(let status):
            var stderr = StandardError()
            print(outcome.message, to: &stderr)
            throw ExitCode(status)
        case .usage:
            throw ValidationError(outcome.message)
        }
    }
}
