import Foundation
import NIOCore
import NIOPosix
import Synchronization

#if canImport(Glibc)
@preconcurrency import Glibc
#endif

/// A program run as a child of the test process, started with `posix_spawn`: the tests' one
/// way to start a process. Foundation's `Process.run()` is not used: on Linux it copies each
/// name it reads from /proc/self/fd as a whole 256-byte `d_name`, past the end of glibc's
/// buffer, and crashes the test run (signal 11) when the listing ends at a page boundary:
/// once the process holds some thousand descriptors, as it does while the tests run side by
/// side (swift-corelibs-foundation pull request 5472).
///
/// The child gets only the descriptors asked for (every other one is closed in it), an empty
/// signal mask and a process group of its own, as `Process` gives it.
public final class ChildProcess: Sendable {
    /// Where one of the child's standard streams goes.
    public enum Stream: Sendable {
        /// `/dev/null`.
        case null
        /// A pipe to or from the test: its end is in ``standardInput``, ``standardOutput`` or ``standardError``.
        case pipe
        /// This descriptor of the test process (a file, a socket), shared with the child.
        case descriptor(Int32)
    }

    /// The child's process id.
    public let pid: pid_t
    /// The directory it runs in (nil: the test process's).
    public let directory: String?
    /// The write end of its standard input, when it is a pipe (closing it is the end of input).
    public let standardInput: FileHandle?
    /// What it writes to its standard output, when that is a pipe.
    public let standardOutput: Output?
    /// What it writes to its standard error, when that is a pipe.
    public let standardError: Output?
    /// The wait status, once reaped.
    private let reaped = Mutex<Int32?>(nil)

    /// Starts `executable` with `arguments`, in `directory`, with `environment` (nil: the test
    /// process's own); `passing` are descriptors of the test it gets as 3, 4, … (the way
    /// systemd passes sockets).
    public init(_ executable: String, _ arguments: [String], directory: String? = nil, environment: [String: String]? = nil,
                input: Stream = .null, output: Stream = .null, error: Stream = .null, passing: [Int32] = []) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // The test's ends of the pipes, and the child's ends (closed here once it has them).
        var ours: [Int32?] = [nil, nil, nil]
        var theirs: [Int32] = []
        defer { for descriptor in theirs { close(descriptor) } }
        for (target, stream) in [input, output, error].enumerated() {
            switch stream {
            case .null:
                posix_spawn_file_actions_addopen(&actions, Int32(target), "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0)
            case .descriptor(let descriptor):
                posix_spawn_file_actions_adddup2(&actions, descriptor, Int32(target))
            case .pipe:
                var ends: [Int32] = [-1, -1]
                guard pipe(&ends) == 0 else { throw ChildProcessError.system("pipe", errno) }
                for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
                let (child, test) = target == 0 ? (ends[0], ends[1]) : (ends[1], ends[0])
                theirs.append(child)
                ours[target] = test
                posix_spawn_file_actions_adddup2(&actions, child, Int32(target))
            }
        }
        for (index, descriptor) in passing.enumerated() { posix_spawn_file_actions_adddup2(&actions, descriptor, Int32(3 + index)) }
        // Nothing else of the test process: not its sockets, not another child's pipes.
        guard Self.addCloseFrom(&actions, Int32(3 + passing.count)) == 0 else { throw ChildProcessError.system("posix_spawn_file_actions_addclosefrom_np", errno) }
        if let directory, Self.addChdir(&actions, directory) != 0 {
            throw ChildProcessError.system("posix_spawn_file_actions_addchdir_np", errno)
        }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP))

        let variables = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        var argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        var envp: [UnsafeMutablePointer<CChar>?] = variables.map { strdup($0) } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, &attributes, &argv, &envp)
        guard spawned == 0 else {
            for case let descriptor? in ours { close(descriptor) }
            throw ChildProcessError.system("posix_spawn \(executable)", spawned)
        }
        self.pid = pid
        self.directory = directory
        standardInput = ours[0].map { FileHandle(fileDescriptor: $0, closeOnDealloc: true) }
        (standardOutput, standardError) = (ours[1].map(Output.init), ours[2].map(Output.init))
    }

    /// Whether it still runs (reaps it once it ended).
    public var isRunning: Bool { waitStatus() == nil }

    /// Its exit status, or the signal that ended it (0 while it runs).
    public var terminationStatus: Int32 {
        guard let status = waitStatus() else { return 0 }
        return status & 0x7F == 0 ? (status >> 8) & 0xFF : status & 0x7F
    }

    /// Sends a signal.
    public func signal(_ signal: Int32) {
        if isRunning { kill(pid, signal) }
    }

    /// Waits until it ends, killing it after `timeout`; its exit status (or ending signal).
    @discardableResult
    public func waitUntilExit(timeout: Duration = eventuallyTimeout) async -> Int32 {
        if (try? await poll(timeout: timeout) { !isRunning }) != true, isRunning {
            kill(pid, SIGKILL)
            _ = try? await poll(timeout: .seconds(10)) { !isRunning }
        }
        return terminationStatus
    }

    /// Waits until it ends, blocking the calling thread: only for a program that ends at once
    /// (`mount`, `prlimit`) where the caller cannot wait asynchronously.
    @discardableResult
    public func waitBlocking() -> Int32 {
        reaped.withLock { reaped in
            if reaped == nil {
                var status: Int32 = 0
                while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
                reaped = status
            }
        }
        return terminationStatus
    }

    /// The raw wait status once it ended, reaping it then (never blocks).
    private func waitStatus() -> Int32? {
        reaped.withLock { reaped in
            if reaped == nil {
                var status: Int32 = 0
                if waitpid(pid, &status, WNOHANG) == pid { reaped = status }
            }
            return reaped
        }
    }

    deinit {
        if waitStatus() == nil {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
    }

    /// Runs `executable` to its end, with `input` on its standard input; its status and what
    /// it wrote (standard output and error together).
    public static func run(_ executable: String, _ arguments: [String], directory: String? = nil,
                           input: String? = nil) async throws -> (status: Int32, output: String) {
        let child = try ChildProcess(executable, arguments, directory: directory, input: input == nil ? .null : .pipe, output: .pipe, error: .pipe)
        if let input, let handle = child.standardInput {
            try handle.write(contentsOf: Data(input.utf8))
            try handle.close()
        }
        let status = await child.waitUntilExit()
        let (output, errors) = (child.standardOutput!, child.standardError!)
        _ = try? await poll(timeout: .seconds(5)) { output.isFinished && errors.isFinished }
        return (status, output.text + errors.text)
    }

    // glibc's extensions, which the Glibc module does not show (they need _GNU_SOURCE).
    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private typealias AddChdir = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32
    private static let addCloseFrom = unsafeBitCast(dlsym(dlopen(nil, RTLD_NOW), "posix_spawn_file_actions_addclosefrom_np")!, to: AddCloseFrom.self)
    private static let addChdir = unsafeBitCast(dlsym(dlopen(nil, RTLD_NOW), "posix_spawn_file_actions_addchdir_np")!, to: AddChdir.self)
}

extension ChildProcess {
    /// What a child writes to a pipe, read as it comes, on an event loop, to the pipe's end.
    /// (FileHandle's `readabilityHandler` missed the end now and then: told of the last bytes
    /// and the end in one wake-up, it was not called again.)
    public final class Output: Sendable {
        /// What was read, and whether the pipe ended: the same record as a ``RawConnection``'s.
        private let box = RawConnection.StateBox()

        init(_ descriptor: Int32) {
            let box = self.box
            NIOPipeBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(RawConnection.Recorder(box: box)) }
                }
                .takingOwnershipOfDescriptor(input: descriptor)
                .whenFailure { _ in
                    close(descriptor)
                    box.state.withLock { $0.closed = true }
                }
        }

        /// Everything written so far, as UTF-8 text.
        public var text: String { String(decoding: box.state.withLock { $0.received }, as: UTF8.self) }
        /// Whether the pipe reached its end (everything written was read).
        public var isFinished: Bool { box.state.withLock { $0.closed } }
    }
}

/// Why a child process could not be started.
public enum ChildProcessError: Error, CustomStringConvertible {
    /// A system call failed with this errno.
    case system(String, Int32)

    /// The call and its error.
    public var description: String {
        switch self {
        case .system(let call, let code): return "\(call) failed: \(String(cString: strerror(code)))"
        }
    }
}
