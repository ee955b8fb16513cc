import ArgumentParser
import Foundation
import NIOCore
import NIOPosix

// Parse first (synchronously), so that the event-loop count is known before the loops
// exist; then make those loops Swift Concurrency's executor, which keeps a request on one
// thread from the socket through the chain and back (no hops between thread pools).
var command: any ParsableCommand
do {
    command = try VeneerCommand.parseAsRoot()
} catch {
    VeneerCommand.exit(withError: error)
}
if let run = command as? Run {
    do {
        if let threads = try run.eventLoopThreads(variables: ProcessInfo.processInfo.environment) {
            NIOSingletons.groupLoopCountSuggestion = threads
        }
    } catch {
        VeneerCommand.exit(withError: error)
    }
}
NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
@concurrent func runAsync(_ command: inout some AsyncParsableCommand) async throws {
    try await command.run()
}

do {
    if var asyncCommand = command as? any AsyncParsableCommand {
        try await runAsync(&asyncCommand)
    } else {
        try command.run()
    }
} catch {
    VeneerCommand.exit(withError: error)
}
