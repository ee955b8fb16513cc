/// Who is on the other end of a connection, as the kernel says: for a Unix socket, the
/// calling process's credentials at `connect(2)` (`SO_PEERCRED`, `SO_PEERGROUPS`) and the
/// systemd unit its cgroup names; for a loopback TCP connection with `peer_identity: true`,
/// the owner of the client's socket (`NETLINK_SOCK_DIAG`: a uid only).
///
/// Made once per connection and carried by every ``ProxyRequest`` read from it
/// (``ProxyRequest/peer``), so that a decorator can key on the caller: `block_list`'s
/// `uids`, `groups` and `units` rules read it, and so may any decorator of your own. A
/// caller cannot forge it: nothing of it comes from the request.
public struct PeerIdentity: Sendable, Hashable {
    /// The caller's user id.
    public let uid: UInt32
    /// Its primary group id (nil when the kernel did not say: TCP).
    public let gid: UInt32?
    /// Its supplementary groups, when known (empty otherwise).
    public let groups: [UInt32]
    /// The process id that connected (nil for TCP).
    public let pid: Int32?
    /// The systemd unit the process runs in (`cron.service`, `session-3.scope`), from its
    /// cgroup; nil when unknown.
    public let unit: String?

    /// An identity.
    public init(uid: UInt32, gid: UInt32? = nil, groups: [UInt32] = [], pid: Int32? = nil, unit: String? = nil) {
        self.uid = uid
        self.gid = gid
        self.groups = groups
        self.pid = pid
        self.unit = unit
    }

    /// Whether the caller is in group `gid`, primary or supplementary.
    public func isInGroup(_ gid: UInt32) -> Bool {
        self.gid == gid || groups.contains(gid)
    }

    /// The unit named in the text of `/proc/PID/cgroup`: the last path component of the
    /// unified hierarchy (`0::/…`) that is a unit (`.service`, `.scope`, `.socket`, `.mount`,
    /// `.swap`, `.timer`), so that `/user.slice/user-1000.slice/user@1000.service/app.slice/x.service`
    /// gives `x.service` and `/system.slice/cron.service` gives `cron.service`; nil when none.
    public static func unit(fromCgroup text: some StringProtocol) -> String? {
        let line = text.split(separator: "\n").first { $0.hasPrefix("0::") } ?? text.split(separator: "\n").last
        guard let line, let colon = line.lastIndex(of: ":") else { return nil }
        let path = line[line.index(after: colon)...]
        let suffixes = [".service", ".scope", ".socket", ".mount", ".swap", ".timer"]
        guard let unit = path.split(separator: "/").last(where: { component in suffixes.contains { component.hasSuffix($0) } }) else { return nil }
        return String(unit)
    }
}
