import Foundation
import HTTPTypes
import Testing
import VeneerConfig
import VeneerCore
@testable import VeneerDecorators
import VeneerTestSupport

/// `block_list` rules on who calls (issue 29): `uids`, `groups`, `units`, from the kernel's
/// ``PeerIdentity`` of the request.
@Suite("block_list caller rules")
struct BlockListCallerTests {
    static let cron = PeerIdentity(uid: 1001, gid: 1001, groups: [27, 990], pid: 4242, unit: "cron.service")
    static let web = PeerIdentity(uid: 33, gid: 33, pid: 77, unit: "php-fpm.service")

    func caller(_ peer: PeerIdentity?) -> ProxyRequest {
        ProxyRequest(method: .get, route: .list(.posts), peer: peer)
    }

    /// Whether `rules` let `peer` through to the inner handler.
    func allows(_ rules: String, _ peer: PeerIdentity?) async throws -> Bool {
        let inner = RecordingHandler()
        let decorator = try await blockList(rules, inner: inner)
        do {
            _ = try await decorator.handle(caller(peer))
            return true
        } catch let error as ProxyError {
            #expect(error.code == .clientBlocked && error.status == .forbidden)
            #expect(inner.count == 0)
            return false
        }
    }

    @Test("deny and allow by uid, group (primary or supplementary, by number or name) and unit glob; allow lists deny everyone else, unknown callers included")
    func rules() async throws {
        #expect(try await allows("{deny: {uids: [1001]}}", Self.web))
        #expect(try await !allows("{deny: {uids: [1001]}}", Self.cron))
        #expect(try await !allows("{deny: {units: ['cron*.service']}}", Self.cron))
        #expect(try await allows("{deny: {units: ['cron*.service']}}", Self.web))
        #expect(try await !allows("{deny: {groups: [990]}}", Self.cron), "a supplementary group")
        #expect(try await allows("{deny: {uids: [1001]}}", nil), "a deny list does not refuse callers it cannot name")

        #expect(try await allows("{allow: {uids: [33]}}", Self.web))
        #expect(try await !allows("{allow: {uids: [33]}}", Self.cron))
        #expect(try await !allows("{allow: {uids: [33]}}", nil), "an allow list refuses a caller the kernel did not name")
        #expect(try await allows("{allow: {uids: [33], units: ['cron.service']}}", Self.cron), "uids, groups and units are one kind: any lets in")
        let rootGroup = String(cString: getgrgid(0)!.pointee.gr_name)
        #expect(try await allows("{allow: {groups: [\(rootGroup)]}}", PeerIdentity(uid: 5, gid: 0)), "a group by name")
        #expect(try await !allows("{allow: {uids: [33], methods: [POST]}}", Self.web), "other kinds must match too")
    }

    @Test("rules_file lines: allow uid, allow group, deny unit; errors at the file's line and column")
    func rulesFile() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let rootGroup = String(cString: getgrgid(0)!.pointee.gr_name)
        try "allow uid 1001\nallow group \(rootGroup)\ndeny unit cron*.service\n".write(toFile: directory + "/rules.txt", atomically: true, encoding: .utf8)
        let options = try blockListOptions("{rules_file: \(directory)/rules.txt}")
        #expect(options.allow.uids == [1001])
        #expect(options.allow.groups == [0])
        #expect(options.deny.units.map(\.description) == ["cron*.service"])
        #expect(try await !allows("{rules_file: \(directory)/rules.txt}", Self.cron), "allowed by uid, denied by unit: deny wins")

        try "allow group no-such-group-29\ndeny unit cron service\nallow uid no-such-user-29\n".write(toFile: directory + "/bad.txt", atomically: true, encoding: .utf8)
        do {
            _ = try blockListOptions("{rules_file: \(directory)/bad.txt}")
            Issue.record("expected errors")
        } catch let error as ConfigError {
            #expect(error.diagnostics.map(\.description) == [
                "\(directory)/bad.txt:1:13: there is no group \"no-such-group-29\" on this machine",
                "\(directory)/bad.txt:2:16: expected 'unit PATTERN'",
                "\(directory)/bad.txt:3:11: \"no-such-user-29\" is not a user (a name or a number)",
            ])
        }
    }

    @Test("YAML errors name the place: an unknown group, a unit that is no unit name")
    func yamlErrors() {
        #expect(throws: ConfigError.self) { try blockListOptions("{allow: {groups: [no-such-group-29]}}") }
        #expect(throws: ConfigError.self) { try blockListOptions("{deny: {units: ['cron service']}}") }
    }

    @Test("the unit of a process comes from its cgroup: the last unit on the unified hierarchy's path")
    func unitFromCgroup() {
        #expect(PeerIdentity.unit(fromCgroup: "0::/system.slice/cron.service\n") == "cron.service")
        #expect(PeerIdentity.unit(fromCgroup: "0::/user.slice/user-1000.slice/user@1000.service/app.slice/backup.service\n") == "backup.service")
        #expect(PeerIdentity.unit(fromCgroup: "0::/user.slice/user-1000.slice/session-3.scope\n") == "session-3.scope")
        #expect(PeerIdentity.unit(fromCgroup: "12:cpu:/docker/abc\n0::/\n") == nil)
        #expect(PeerIdentity.unit(fromCgroup: "") == nil)
    }
}
