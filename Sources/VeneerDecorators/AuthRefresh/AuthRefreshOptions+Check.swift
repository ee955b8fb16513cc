import Foundation
import VeneerConfig

#if canImport(Glibc)
@preconcurrency import Glibc
#endif

extension AuthRefreshOptions {
    /// What `veneer check` warns about the token store, found without writing anything:
    /// a store where a rotated refresh token could not be saved makes `veneer run` exit 78
    /// (or hold refreshing while it lasts), and a memory store loses it at every restart.
    func storeWarnings(environment: EnvironmentSpec) -> [String] {
        let folder: String
        switch store {
        case nil:
            folder = environment.stateDirectory + "/auth_refresh"
        case "memory":
            return ["store: memory keeps the rotated refresh token in memory only: after a restart the configured one is presented again, "
                + "which an authorization server that rotates refresh tokens refuses (and may answer by revoking the whole token family)"]
        case let name?:
            guard case .sqlite(let path)? = environment.stores[name] else { return [] }
            folder = (path as NSString).deletingLastPathComponent
        }
        if let problem = Self.writeProblem(folder) {
            return ["the token store \(folder) cannot be written (\(problem)): `veneer run` would refuse to start (exit 78)"]
        }
        return []
    }

    /// Why `folder` (or, when it does not exist yet, the nearest folder above it, where it
    /// would be made) cannot be written; nil when it can.
    static func writeProblem(_ folder: String) -> String? {
        var path = folder.isEmpty ? "." : folder
        while true {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) {
                guard isDirectory.boolValue else { return "\(path) is not a folder" }
                return access(path, W_OK | X_OK) == 0 ? nil : "\(path): \(String(cString: strerror(errno)))"
            }
            let parent = (path as NSString).deletingLastPathComponent
            if parent == path || parent.isEmpty { return nil }
            path = parent
        }
    }
}
