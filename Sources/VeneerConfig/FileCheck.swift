import Foundation

/// What `veneer check` can tell about a file that `veneer run` will open for writing (an
/// access log, a latency log, a HAR file) without creating anything, so that what `run`
/// would refuse, `check` reports at the line of the key.
public enum FileCheck {
    /// Which missing folders the writer makes before it opens the file.
    public enum Folders: Sendable {
        /// Only the file's own folder (the access log).
        case last
        /// Every missing folder on the way (latency logs, HAR files).
        case all
    }

    /// Why `path` could not be opened for writing (and reading, with `reading`), creating it
    /// when missing: the system's reason, as `run` would print it, or nil when it would open.
    public static func openProblem(_ path: String, folders: Folders, reading: Bool = false) -> String? {
        func reason(_ code: Int32) -> String { String(cString: strerror(code)) }
        var status = stat()
        if stat(path, &status) == 0 {
            if (status.st_mode & S_IFMT) == S_IFDIR { return reason(EISDIR) }
            return access(path, reading ? W_OK | R_OK : W_OK) == 0 ? nil : reason(errno)
        }
        guard errno == ENOENT else { return reason(errno) }
        // The nearest folder that exists must be one, and writable; between it and the file,
        // only the folders the writer makes may be missing.
        var folder = parent(of: path)
        var missing = 0
        while stat(folder, &status) != 0 {
            guard errno == ENOENT, folder != "/" else { return reason(errno) }
            missing += 1
            folder = parent(of: folder)
        }
        if missing > (folders == .last ? 1 : Int.max) { return reason(ENOENT) }
        guard (status.st_mode & S_IFMT) == S_IFDIR else { return reason(ENOTDIR) }
        return access(folder, W_OK | X_OK) == 0 ? nil : reason(errno)
    }

    static func parent(of path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return "." }
        return slash == trimmed.startIndex ? "/" : String(trimmed[..<slash])
    }
}
