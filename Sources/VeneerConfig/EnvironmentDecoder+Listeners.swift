import Foundation

extension ConfigDocument {
    /// One `listen` address: `host:port` or `unix:/path` (a relative path resolves against the
    /// configuration file's folder). A path that exists and is not a socket is an error here,
    /// at its line: Veneer replaces a stale socket file, never anything else.
    func decodeListenAddress(_ value: ConfigValue, example: String) -> ListenAddress? {
        guard let text = value.string() else { return nil }
        guard let parsed = ListenAddress(text) else {
            value.error("\(quoted(text)) is not a listen address (use e.g. \(example))")
            return nil
        }
        guard let path = parsed.socketPath else { return parsed }
        let resolved = resolve(path: path, against: value.context.baseDirectory)
        if resolved.utf8.count > ListenAddress.maximumSocketPath {
            value.error("the socket path \(resolved) is \(resolved.utf8.count) bytes long; a Unix socket's path holds at most "
                + "\(ListenAddress.maximumSocketPath)")
            return nil
        }
        if let problem = Self.socketPathProblem(resolved) {
            value.error(problem)
            return nil
        }
        return ListenAddress(socketPath: resolved)
    }

    /// Why Veneer cannot create a socket at `path`: something else is there, or its folder is
    /// missing (nil when a socket may be made there; a stale socket is replaced).
    static func socketPathProblem(_ path: String) -> String? {
        var status = stat()
        if lstat(path, &status) == 0 {
            guard (status.st_mode & S_IFMT) == S_IFSOCK else {
                return "\(path) exists and is not a socket (Veneer replaces only a stale socket file): remove it or choose another path"
            }
            return nil
        }
        let folder = FileCheck.parent(of: path)
        var folderStatus = stat()
        guard stat(folder, &folderStatus) == 0, (folderStatus.st_mode & S_IFMT) == S_IFDIR else {
            return "the folder of \(path) does not exist (systemd's RuntimeDirectory=veneer makes /run/veneer)"
        }
        return nil
    }

    /// `socket: { mode: "0660", group: NAME }`: what Veneer sets on the sockets it creates.
    /// The group must exist here (by name or number), as `veneer check` reports.
    func decodeSocketOptions(_ environment: ConfigMapping) -> SocketOptions {
        var options = SocketOptions()
        guard let mapping = environment.mapping("socket", allowedKeys: ["mode", "group"]) else { return options }
        if let value = mapping["mode"], let text = value.scalarText("an octal mode such as \"0660\"") {
            if let mode = UInt32(text, radix: 8), mode <= 0o777 {
                options.mode = mode
            } else {
                value.error("\(quoted(text)) is not a permission mode (use octal, e.g. \"0660\"; quote it in YAML)")
            }
        }
        if let value = mapping["group"], let name = value.string() {
            if let gid = Self.groupID(name) {
                options.group = name
                options.groupID = gid
            } else {
                value.error("there is no group \(quoted(name)) on this machine (create it: groupadd \(name))")
            }
        }
        return options
    }

    /// The id of user `name` (a name, or any number: a uid needs no account to connect).
    public static func userID(_ name: String) -> UInt32? {
        if let number = UInt32(name) { return number }
        var entry = passwd()
        return lookUp { buffer, found in getpwnam_r(name, &entry, buffer.baseAddress!, buffer.count, found) } ? entry.pw_uid : nil
    }

    /// The id of group `name` (a name, or any number).
    public static func groupID(_ name: String) -> UInt32? {
        if let number = UInt32(name) { return number }
        var entry = group()
        return lookUp { buffer, found in getgrnam_r(name, &entry, buffer.baseAddress!, buffer.count, found) } ? entry.gr_gid : nil
    }

    /// Runs a reentrant account lookup (`getpwnam_r`, `getgrnam_r`) with a buffer of its own,
    /// larger while it says ERANGE; whether the account exists (its entry filled in).
    /// (`getpwnam` and `getgrnam` return one result shared by every thread: configurations
    /// decoded side by side read each other's ids.)
    private static func lookUp<Entry>(_ call: (UnsafeMutableBufferPointer<CChar>, UnsafeMutablePointer<UnsafeMutablePointer<Entry>?>) -> Int32) -> Bool {
        var size = 1024
        while size <= 32 << 20 {
            var found: UnsafeMutablePointer<Entry>?
            let result = withUnsafeTemporaryAllocation(of: CChar.self, capacity: size) { buffer in call(buffer, &found) }
            if result == ERANGE {
                size *= 4
                continue
            }
            return result == 0 && found != nil
        }
        return false
    }
}

extension ConfigNode {
    /// Whether this is a sequence.
    var isList: Bool {
        if case .sequence = self { return true }
        return false
    }
}
