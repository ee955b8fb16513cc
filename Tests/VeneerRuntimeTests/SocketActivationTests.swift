import Testing
import VeneerConfig
@testable import VeneerRuntime

/// Which socket systemd passed serves which listener (issue 29).
@Suite("Socket activation: matching passed sockets to listeners")
struct SocketActivationTests {
    static func passed(_ descriptor: Int32, _ name: String?, _ address: String) -> SocketActivation.Passed {
        SocketActivation.Passed(descriptor: descriptor, name: name, address: ListenAddress(address))
    }

    @Test("by address (a path, an address and port, localhost as loopback), admin by name or address; the rest serve the posts API too")
    func assign() {
        let activation = SocketActivation(passed: [
            Self.passed(3, "veneer@production.socket", "unix:/run/veneer/production.sock"),
            Self.passed(4, "veneer@production.socket", "127.0.0.1:8080"),
            Self.passed(5, "admin", "unix:/run/veneer/production-admin.sock"),
            Self.passed(6, "extra", "[::1]:8081"),
        ])
        let listeners = [ListenAddress("localhost:8080")!, ListenAddress("unix:/run/veneer/production.sock")!, ListenAddress("127.0.0.1:9999")!]
        let assignment = activation.assign(listeners: listeners, admin: ListenAddress("127.0.0.1:9090"))
        #expect(assignment.main[0]?.descriptor == 4)
        #expect(assignment.main[1]?.descriptor == 3)
        #expect(assignment.main[2] == nil, "bound as without systemd")
        #expect(assignment.admin?.descriptor == 5)
        #expect(assignment.extra.map(\.descriptor) == [6])

        let noAdmin = activation.assign(listeners: listeners, admin: nil)
        #expect(noAdmin.admin == nil)
        #expect(noAdmin.extra.map(\.descriptor) == [5, 6], "without an admin listener, a socket named admin serves the posts API")
    }

    @Test("sockets are taken only when LISTEN_PID is this process")
    func onlyOurs() {
        #expect(SocketActivation.from(["LISTEN_FDS": "1", "LISTEN_PID": "1"], pid: 4242).passed.isEmpty)
        #expect(SocketActivation.from(["LISTEN_FDS": "0", "LISTEN_PID": "4242"], pid: 4242).passed.isEmpty)
        #expect(SocketActivation.from([:], pid: 4242).passed.isEmpty)
    }
}
