#if canImport(Glibc)
@preconcurrency import Glibc
#endif

/// The permissions of a Unix socket file Veneer created: `socket: { mode, group }`.
enum SocketFile {
    /// Gives `path` `mode` and group `groupID` (either may be nil: left as created); the
    /// problem, for a person, when the system refuses.
    static func apply(path: String, mode: UInt32?, groupID: UInt32?) -> String? {
        if let groupID, chown(path, uid_t.max, groupID) != 0 {
            let reason = String(cString: strerror(errno))
            return "cannot give the socket group \(groupID): \(reason) (Veneer's user must be a member of the group, or root)"
        }
        if let mode, chmod(path, mode_t(mode)) != 0 {
            return "cannot set the socket's mode to \(String(mode, radix: 8)): \(String(cString: strerror(errno)))"
        }
        return nil
    }
}
