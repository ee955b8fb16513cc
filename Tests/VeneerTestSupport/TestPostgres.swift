import Foundation

#if canImport(Glibc)
@preconcurrency import Glibc
#endif

/// A real PostgreSQL server for tests: `initdb` in a temporary folder, a free port on
/// 127.0.0.1, password authentication over TCP, stopped (and removed) by ``destroy()``.
/// As root it runs the server as the `postgres` user, which `initdb` requires.
public final class TestPostgres: @unchecked Sendable {
    /// The cluster's folder.
    public let directory: String
    /// Its port.
    public let port: Int
    /// The superuser password (also in ``passwordFile``).
    public let password = "pg-test-password"
    /// A file holding the password, for `password_file`.
    public let passwordFile: String
    let binaries: String

    /// `postgres://postgres@127.0.0.1:PORT/postgres?sslmode=disable` (password separate).
    public var url: String { "postgres://postgres@127.0.0.1:\(port)/postgres?sslmode=disable" }

    /// Where the server binaries are, or nil when PostgreSQL is not installed.
    public static var binaries: String? {
        if let explicit = ProcessInfo.processInfo.environment["PG_BIN"] { return explicit }
        let root = "/usr/lib/postgresql"
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: root))?.compactMap(Int.init).sorted() ?? []
        if let newest = versions.last { return "\(root)/\(newest)/bin" }
        return nil
    }

    /// Creates and starts a cluster.
    public static func start() async throws -> TestPostgres {
        guard let binaries else { throw TestPostgresError.notInstalled }
        var attempt = 1
        while true {
            let server = try TestPostgres(binaries: binaries, port: try await freePort())
            do {
                try await server.initialize()
                try await server.startServer()
                return server
            } catch {
                // The free port may have been taken meanwhile by a parallel test: try another.
                await server.destroy()
                guard attempt < 3 else { throw error }
                attempt += 1
            }
        }
    }

    private init(binaries: String, port: Int) throws {
        self.binaries = binaries
        self.port = port
        directory = "/tmp/veneer-pg-\(UUID().uuidString.prefix(8))"
        passwordFile = directory + "/password"
        try FileManager.default.createDirectory(atPath: directory + "/data", withIntermediateDirectories: true)
        try password.write(toFile: passwordFile, atomically: true, encoding: .utf8)
    }

    var runAsPostgres: [String] { getuid() == 0 ? ["/usr/sbin/runuser", "-u", "postgres", "--"] : [] }

    /// Runs a command to completion (as `postgres` when root) and returns its output (written
    /// to a file: the server that `pg_ctl start` leaves running must hold no pipe of the test).
    @discardableResult
    func run(_ arguments: [String]) async throws -> String {
        let command = runAsPostgres + arguments
        let outputPath = directory + "/command-\(UUID().uuidString.prefix(8)).out"
        defer { try? FileManager.default.removeItem(atPath: outputPath) }
        let output = open(outputPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o666)
        guard output >= 0 else { throw TestPostgresError.failed(outputPath, "open: \(errno)") }
        let child: ChildProcess
        do {
            child = try ChildProcess(command[0], Array(command.dropFirst()), output: .descriptor(output), error: .descriptor(output))
            close(output)
        } catch {
            close(output)
            throw error
        }
        // pg_ctl bounds its own waits (-t 30).
        let status = await child.waitUntilExit(timeout: .seconds(120))
        let said = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        guard status == 0 else { throw TestPostgresError.failed(arguments.joined(separator: " "), said) }
        return said
    }

    func initialize() async throws {
        if getuid() == 0 {
            // The server runs as postgres: it must own its folder (chown(2) needs no child process).
            let postgres = getpwnam("postgres")
            guard let postgres else { throw TestPostgresError.failed("getpwnam", "no postgres user") }
            for path in [directory, directory + "/data", passwordFile] {
                chown(path, postgres.pointee.pw_uid, postgres.pointee.pw_gid)
            }
        }
        try await run(["\(binaries)/initdb", "-D", directory + "/data", "-U", "postgres", "--auth-local=trust", "--auth-host=scram-sha-256",
                 "--pwfile=\(passwordFile)", "-E", "UTF8", "--no-instructions"])
    }

    func startServer() async throws {
        try await run(["\(binaries)/pg_ctl", "-D", directory + "/data", "-l", directory + "/server.log", "-w", "-t", "30", "-o",
                 "-c listen_addresses=127.0.0.1 -p \(port) -c unix_socket_directories=\(directory) -c fsync=off -c max_connections=100",
                 "start"])
    }

    /// Stops the server; `immediate` is a crash as far as clients can tell.
    public func stop(immediate: Bool = false) async throws {
        try await run(["\(binaries)/pg_ctl", "-D", directory + "/data", "-m", immediate ? "immediate" : "fast", "-w", "stop"])
    }

    /// Freezes (SIGSTOP) or thaws (SIGCONT) the server and every backend: to its clients, a
    /// database that stops answering without closing anything, as behind a network partition.
    public func freeze(_ frozen: Bool) throws {
        guard let text = try? String(contentsOfFile: directory + "/data/postmaster.pid", encoding: .utf8),
              let line = text.split(separator: "\n").first, let postmaster = Int32(line) else {
            throw TestPostgresError.failed("freeze", "no postmaster.pid")
        }
        var pids = [postmaster]
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = Int32(entry), let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { continue }
            // Fields after "(comm)": state, then the parent's pid.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 1, Int32(fields[1]) == postmaster { pids.append(pid) }
        }
        for pid in pids { kill(pid, frozen ? SIGSTOP : SIGCONT) }
    }

    /// Starts it again after ``stop(immediate:)``.
    public func restart() async throws { try await startServer() }

    /// Stops it and removes its folder.
    public func destroy() async {
        try? await stop()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// Why the test database could not be provided.
public enum TestPostgresError: Error, CustomStringConvertible {
    case notInstalled
    case failed(String, String)
    public var description: String {
        switch self {
        case .notInstalled: return "PostgreSQL is not installed (make test installs it: apt-get install postgresql)"
        case .failed(let command, let output): return "\(command) failed:\n\(output)"
        }
    }
}
