import Foundation
import Testing
import VeneerTestSupport

/// `listen: unix:/path`: only the processes the socket's permissions let in reach Veneer,
/// and the kernel names each caller (issue 29).
@Suite("Unix socket listeners of the real binary")
struct UnixSocketProcessTests {
    /// The JSON lines of the file at `path` (none while it is missing).
    static func lines(_ path: String) -> [[String: Any]] {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    func lines(_ path: String) -> [[String: Any]] { Self.lines(path) }

    /// A group other than the test's own, which it may give a file (the tests run as root
    /// in CI; otherwise the test's own primary group).
    var otherGroup: (name: String, gid: UInt32) {
        if getuid() == 0, let entry = getgrnam("daemon") { return ("daemon", entry.pointee.gr_gid) }
        let gid = getgid()
        return (String(cString: getgrgid(gid)!.pointee.gr_name), gid)
    }

    @Test("a socket and a loopback port in one environment: the socket answers, has mode 0660 and the group, and the access log names the caller's uid and pid")
    func socketAndPort() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let group = otherGroup
        try """
            environments:
              development:
                listen: [unix:\(directory)/veneer.sock, 127.0.0.1:0]
                socket: { mode: "0660", group: \(group.name) }
                origin: { mock: {} }
                access_log: access.log
            """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        let process = try VeneerProcess(["run", "--config", "veneer.yaml"], directory: directory)
        defer { process.terminate() }
        let port = try await process.waitUntilReady()

        let overSocket = try await UnixHTTP.request(socket: directory + "/veneer.sock", "GET", "/posts")
        #expect(overSocket.status == 200, "\(overSocket.text)")
        #expect(try await RawHTTP.request(port: port, "GET", "/posts").status == 200, "the loopback port serves too")

        var file = stat()
        #expect(lstat(directory + "/veneer.sock", &file) == 0)
        #expect(file.st_mode & S_IFMT == S_IFSOCK)
        #expect(file.st_mode & 0o777 == 0o660, "mode \(String(file.st_mode & 0o777, radix: 8))")
        #expect(file.st_gid == group.gid)

        try await eventually("both requests are logged") { lines(directory + "/access.log").count >= 2 }
        let logged = lines(directory + "/access.log")
        let socketLine = try #require(logged.first { $0["peer.uid"] != nil }, "\(logged)")
        #expect(socketLine["peer.uid"] as? Int == Int(getuid()))
        #expect(socketLine["peer.gid"] as? Int == Int(getgid()))
        #expect(socketLine["peer.pid"] as? Int == Int(getpid()), "the test process itself connected")
        #expect(socketLine["client.address"] == nil)
        #expect(logged.filter { $0["peer.uid"] != nil }.count == 1, "a TCP request names no peer without peer_identity")

        // The status page's rows name the caller too; a caller on the socket is local, so the
        // admin API answers it there.
        let status = try await UnixHTTP.request(socket: directory + "/veneer.sock", "GET", "/-/status")
        #expect(status.status == 200)
        let rows = try #require(status.json?["requests"] as? [[String: Any]])
        let peers = rows.compactMap { $0["peer"] as? [String: Any] }
        #expect(peers.count == 1)
        #expect(peers.first?["uid"] as? Int == Int(getuid()) && peers.first?["pid"] as? Int == Int(getpid()))
        let page = try await UnixHTTP.request(socket: directory + "/veneer.sock", "GET", "/-/", headers: [("Accept", "text/html")])
        #expect(page.text.contains("uid \(getuid()) pid \(getpid())"), "the page's row names the caller")
        // Counted by the caller's unit (this process's, or none when its cgroup names no unit).
        let metrics = try await UnixHTTP.request(socket: directory + "/veneer.sock", "GET", "/-/metrics").text
        let byUnit = metrics.split(separator: "\n").filter { $0.hasPrefix("veneer_http_requests_by_unit_total{") }
        #expect(byUnit.count == 1, "\(byUnit)")
        #expect(byUnit.first.flatMap { $0.split(separator: " ").last.flatMap { Double($0) } } ?? 0 >= 3, "\(byUnit)")
    }

    @Test("a stale socket file from a crash is replaced; a path that is not a socket is an error at FILE:LINE:COL for check and run")
    func staleAndWrongPath() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // A socket left behind: bound, then closed without unlinking.
        let stale = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let path = directory + "/veneer.sock"
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            buffer.copyBytes(from: Array(path.utf8) + [0])
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(stale, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        #expect(bound == 0)
        close(stale)
        try """
            environments:
              development:
                listen: unix:\(path)
                origin: { mock: {} }
            """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        let check = try await VeneerProcess.run(["check", "--config", "veneer.yaml"], directory: directory)
        #expect(check.status == 0, "a stale socket is fine: \(check.stderr)")
        let process = try VeneerProcess(["run", "--config", "veneer.yaml"], directory: directory)
        defer { process.terminate() }
        _ = try await process.waitUntilReady()
        #expect(try await UnixHTTP.request(socket: path, "GET", "/posts").status == 200)
        process.signal(SIGTERM)
        #expect(await process.wait() == 0)

        #expect(!FileManager.default.fileExists(atPath: path), "a clean stop removes the socket it made")
        try "not a socket".write(toFile: path, atomically: true, encoding: .utf8)
        let wrong = try await VeneerProcess.run(["check", "--config", "veneer.yaml"], directory: directory)
        #expect(wrong.status == 78)
        #expect(wrong.stderr.contains("veneer.yaml:3:13: error: environments.development.listen: \(path) exists and is not a socket"), "\(wrong.stderr)")
        let run = try await VeneerProcess.run(["run", "--config", "veneer.yaml"], directory: directory)
        #expect(run.status == 78, "\(run.stderr)")
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "not a socket", "never removed")
    }

    @Test("veneer check names an unknown socket group and a bad mode at their lines")
    func checkSocketOptions() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try """
            environments:
              development:
                listen: [unix:\(directory)/veneer.sock, "127.0.0.1:0"]
                socket: { mode: "0968", group: no-such-group-29 }
                origin: { mock: {} }
            """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        let check = try await VeneerProcess.run(["check", "--config", "veneer.yaml"], directory: directory)
        #expect(check.status == 78)
        #expect(check.stderr.contains("veneer.yaml:4:21: error: environments.development.socket.mode: \"0968\" is not a permission mode"), "\(check.stderr)")
        #expect(check.stderr.contains("veneer.yaml:4:36: error: environments.development.socket.group: there is no group \"no-such-group-29\""),
                "\(check.stderr)")
    }

    @Test("the admin API on a socket of its own; the posts API's socket does not serve it")
    func adminSocket() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try """
            environments:
              development:
                listen: unix:\(directory)/veneer.sock
                admin: { listen: "unix:\(directory)/admin.sock" }
                origin: { mock: {} }
            """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        let process = try VeneerProcess(["run", "--config", "veneer.yaml"], directory: directory)
        defer { process.terminate() }
        _ = try await process.waitUntilReady()
        #expect(try await UnixHTTP.request(socket: directory + "/admin.sock", "GET", "/-/health").status == 200)
        #expect(try await UnixHTTP.request(socket: directory + "/admin.sock", "GET", "/posts").status == 404)
        #expect(try await UnixHTTP.request(socket: directory + "/veneer.sock", "GET", "/-/health").status == 404)
        #expect(try await UnixHTTP.request(socket: directory + "/veneer.sock", "GET", "/posts").status == 200)
        // The commands that act through the running instance reach it on its admin socket.
        let reloaded = try await VeneerProcess.run(["reload", "--config", "veneer.yaml"], directory: directory)
        #expect(reloaded.status == 0, "\(reloaded.stdout)\(reloaded.stderr)")
        #expect(reloaded.stdout.contains("generation 2"), "\(reloaded.stdout)")
    }

    @Test("block_list allow: { uids: [OTHER] } refuses the test's own uid with 403 client_blocked; its own uid passes, a TCP caller (unknown) does not")
    func allowUIDs() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let own = getuid()
        try """
            environments:
              other:
                listen: unix:\(directory)/other.sock
                origin: { mock: {} }
                chain:
                  - block_list: { allow: { uids: [\(own + 4242)] } }
              own:
                listen: [unix:\(directory)/own.sock, 127.0.0.1:0]
                origin: { mock: {} }
                chain:
                  - block_list: { rules_file: rules.txt }
            """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        try "allow uid \(own)\n".write(toFile: directory + "/rules.txt", atomically: true, encoding: .utf8)
        let other = try VeneerProcess(["run", "--config", "veneer.yaml", "--environment", "other"], directory: directory)
        defer { other.terminate() }
        _ = try await other.waitUntilReady()
        let refused = try await UnixHTTP.request(socket: directory + "/other.sock", "GET", "/posts")
        #expect(refused.status == 403)
        #expect(refused.errorCode == "client_blocked", "\(refused.text)")

        let ownProcess = try VeneerProcess(["run", "--config", "veneer.yaml", "--environment", "own"], directory: directory)
        defer { ownProcess.terminate() }
        let port = try await ownProcess.waitUntilReady()
        #expect(try await UnixHTTP.request(socket: directory + "/own.sock", "GET", "/posts").status == 200)
        let tcp = try await RawHTTP.request(port: port, "GET", "/posts")
        #expect(tcp.status == 403 && tcp.errorCode == "client_blocked", "no peer identity on TCP: not an allowed caller")
    }
}

@Suite("peer_identity on loopback TCP, the real binary")
struct LoopbackIdentityProcessTests {
    @Test("with peer_identity: true the access log names the uid owning the client's socket; without, no peer")
    func uidInAccessLog() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try """
            environments:
              named:
                listen: 127.0.0.1:0
                peer_identity: true
                origin: { mock: {} }
                access_log: named.log
              plain:
                listen: 127.0.0.1:0
                origin: { mock: {} }
                access_log: plain.log
            """.write(toFile: directory + "/veneer.yaml", atomically: true, encoding: .utf8)
        for (environment, named) in [("named", true), ("plain", false)] {
            let process = try VeneerProcess(["run", "--config", "veneer.yaml", "--environment", environment], directory: directory)
            defer { process.terminate() }
            let port = try await process.waitUntilReady()
            #expect(try await RawHTTP.request(port: port, "GET", "/posts").status == 200)
            let path = "\(directory)/\(environment).log"
            func lines() -> [[String: Any]] { UnixSocketProcessTests.lines(path) }
            try await eventually("the request is logged") { !lines().isEmpty }
            let line = try #require(lines().first)
            if named {
                #expect(line["peer.uid"] as? Int == Int(getuid()), "\(line)")
                #expect(line["client.address"] as? String == "127.0.0.1")
            } else {
                #expect(line["peer.uid"] == nil)
            }
        }
    }
}
