import ArgumentParser
import Foundation
import NIOCore
import NIOPosix
import Synchronization

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

/// An async command handed to the task that runs it: the main thread lets go of it.
struct HandedOverCommand: @unchecked Sendable {
    var command: any AsyncParsableCommand
}

/// How the command ended: its error, if any, and the signal that it has ended.
final class CommandOutcome: Sendable {
    let error = Mutex<(any Error)?>(nil)
    let ended = DispatchSemaphore(value: 0)
}

/// Runs `command` to its end and returns its error. An async command runs as a task on the
/// event loops while the main thread waits, blocked, rather than top-level `await`: an async
/// top level hands the main thread to dispatch_main(), which ends it with pthread_exit, a forced
/// unwind of its stack that reads the binary's unwind tables (.eh_frame_hdr, .eh_frame), about
/// 1 MiB that stays resident for the life of the process (README, Benchmarks, idle memory). The
/// waiting thread blocks the asynchronous signals as libdispatch's and the event loops' threads do
/// (all but those a fault raises in the faulting thread, SIGPIPE and SIGPROF), so that SIGTERM,
/// SIGINT and SIGHUP reach the process's signal sources rather than this thread.
func runToEnd(_ command: any ParsableCommand) -> (any Error)? {
    guard let asyncCommand = command as? any AsyncParsableCommand else {
        var command = command
        do {
            try command.run()
            return nil
        } catch {
            return error
        }
    }
    var signals = sigset_t()
    sigfillset(&signals)
    for synchronous in [SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE, SIGSEGV, SIGSYS, SIGPIPE, SIGPROF] {
        sigdelset(&signals, synchronous)
    }
    pthread_sigmask(SIG_BLOCK, &signals, nil)
    let handedOver = HandedOverCommand(command: asyncCommand)
    let outcome = CommandOutcome()
    Task.detached {
        var running = handedOver.command
        do {
            try await runAsync(&running)
        } catch {
            outcome.error.withLock { $0 = error }
        }
        outcome.ended.signal()
    }
    outcome.ended.wait()
    return outcome.error.withLock { $0 }
}

if let error = runToEnd(command) {
    VeneerCommand.exit(withError: error)
}
