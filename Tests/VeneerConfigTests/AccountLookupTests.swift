import Foundation
import Testing
import VeneerConfig

/// User and group names in a configuration (a socket's `group`, block_list's `uids` and
/// `groups`, its rules_file) resolve to their ids, whatever else the process resolves at the
/// same moment.
@Suite("User and group names")
struct AccountLookupTests {
    /// The accounts of a passwd- or group-style file: name and id (fields 1 and 3).
    static func accounts(_ path: String) throws -> [(name: String, id: UInt32)] {
        try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").compactMap { line in
            let fields = line.split(separator: ":", omittingEmptySubsequences: false)
            guard fields.count >= 3, let id = UInt32(fields[2]), !fields[0].isEmpty else { return nil }
            return (String(fields[0]), id)
        }
    }

    @Test("names resolve to their own ids while other threads resolve other names (getgrnam and getpwnam share one result among threads: a parallel run read root as netdev's 112)")
    func concurrentLookups() async throws {
        let groups = Array(try Self.accounts("/etc/group").prefix(8))
        let users = Array(try Self.accounts("/etc/passwd").prefix(8))
        try #require(groups.count >= 2 && users.count >= 2, "the machine's /etc/group and /etc/passwd name some accounts")
        let wrong = await withTaskGroup(of: [String].self) { group in
            for worker in 0..<4 {
                group.addTask {
                    var wrong: [String] = []
                    for round in 0..<3000 {
                        let (name, id) = groups[(worker + round) % groups.count]
                        let resolved = ConfigDocument.groupID(name)
                        if resolved != id { wrong.append("group \(name): \(resolved.map(String.init) ?? "none"), not \(id)") }
                        let (user, uid) = users[(worker + round) % users.count]
                        let resolvedUser = ConfigDocument.userID(user)
                        if resolvedUser != uid { wrong.append("user \(user): \(resolvedUser.map(String.init) ?? "none"), not \(uid)") }
                    }
                    return wrong
                }
            }
            return await group.reduce(into: []) { $0 += $1 }
        }
        #expect(wrong.isEmpty, "\(wrong.count) wrong: \(wrong.prefix(5))")
    }
}
