import Foundation

/// A tmpfs of a fixed size, mounted for one test: a small disk that really fills.
public struct SmallDisk: Sendable {
    /// Where it is mounted.
    public let path: String

    /// Whether this process may mount one (root, or CAP_SYS_ADMIN).
    public static let canMount: Bool = {
        guard let directory = try? temporaryDirectory() else { return false }
        defer { try? FileManager.default.removeItem(atPath: directory) }
        guard (try? SmallDisk(at: directory, size: "64k")) != nil else { return false }
        SmallDisk(path: directory).unmount()
        return true
    }()

    /// Why the tests that need one are skipped, when they are.
    public static let skipReason = "mounting a tmpfs is not permitted here (it needs root or CAP_SYS_ADMIN); the small-disk tests are skipped"

    private init(path: String) { self.path = path }

    /// Mounts a tmpfs of `size` (such as `6m`) on `path`, which is created.
    public init(at path: String, size: String) throws {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let mount = try ChildProcess("/usr/bin/mount", ["-t", "tmpfs", "-o", "size=\(size),mode=0700", "tmpfs", path])
        guard mount.waitBlocking() == 0 else { throw CocoaError(.fileWriteNoPermission) }
        self.path = path
    }

    /// Unmounts it (lazily: a process may still hold a file there).
    public func unmount() {
        (try? ChildProcess("/usr/bin/umount", ["-l", path]))?.waitBlocking()
    }

    /// Bytes an unprivileged writer may still use.
    public var free: Int {
        var stats = statvfs()
        guard statvfs(path, &stats) == 0 else { return 0 }
        return Int(stats.f_bavail) * Int(stats.f_frsize)
    }

    /// Fills the disk to the last byte with a file of its own (another program's); returns its path.
    @discardableResult
    public func fill() -> String {
        let filler = path + "/filler"
        let handle = fopen(filler, "w")
        let chunk = [UInt8](repeating: 0x61, count: 4096)
        while fwrite(chunk, 1, chunk.count, handle) == chunk.count, fflush(handle) == 0 {}
        // The last partial block too.
        while fwrite(chunk, 1, 1, handle) == 1, fflush(handle) == 0 {}
        fclose(handle)
        return filler
    }
}
