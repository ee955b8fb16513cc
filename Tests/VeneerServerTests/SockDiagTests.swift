import Foundation
import NIOCore
import NIOPosix
import Testing
@testable import VeneerServer

/// `peer_identity` on loopback TCP: the kernel's owner of the client's socket, and what asking
/// costs per connection (issue 29).
@Suite("NETLINK_SOCK_DIAG lookups")
struct SockDiagTests {
    @Test("the owner of the client's end of a loopback connection is this process's uid; a lookup costs tens of microseconds")
    func ownerAndCost() async throws {
        let group = MultiThreadedEventLoopGroup.singleton
        let server = try await ServerBootstrap(group: group).bind(host: "127.0.0.1", port: 0).get()
        defer { server.close(promise: nil) }
        let client = try await ClientBootstrap(group: group).connect(host: "127.0.0.1", port: server.localAddress!.port!).get()
        defer { client.close(promise: nil) }
        // The server's view: the client's address is its remote end, the server's its local.
        let clientAddress = try #require(client.localAddress), serverAddress = try #require(client.remoteAddress)
        #expect(SockDiag.owner(client: clientAddress, server: serverAddress) == getuid())
        // A connection that does not exist has no owner.
        let elsewhere = try SocketAddress(ipAddress: "127.0.0.1", port: 1)
        #expect(SockDiag.owner(client: elsewhere, server: serverAddress) == nil)

        let rounds = 2000
        let start = ContinuousClock.now
        for _ in 0..<rounds { _ = SockDiag.owner(client: clientAddress, server: serverAddress) }
        let each = (ContinuousClock.now - start) / rounds
        print("sock_diag lookup: \(each) per connection (mean of \(rounds))")
        #expect(each < .milliseconds(1))
    }

    @Test("a Unix socket caller's groups and unit come from /proc/PID; what that costs per connection")
    func procCost() {
        let credentials = PeerCredentials.UCred(pid: getpid(), uid: getuid(), gid: getgid())
        let identity = PeerCredentials.identity(credentials)
        #expect(identity.uid == getuid() && identity.pid == getpid())
        let rounds = 2000
        let start = ContinuousClock.now
        for _ in 0..<rounds { _ = PeerCredentials.identity(credentials) }
        print("/proc/PID reads (cgroup, status): \((ContinuousClock.now - start) / rounds) per connection (mean of \(rounds))")
        #expect(PeerCredentials.supplementaryGroups("Name:\tx\nGroups:\t4 27 990 \nNSpid:\t1\n") == [4, 27, 990])
    }
}
