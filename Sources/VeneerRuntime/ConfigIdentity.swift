import Foundation

/// Which configuration file an instance serves, as a path two processes agree on.
public enum ConfigIdentity {
    /// The path of the built-in configuration.
    public static let builtIn = "<built-in>"

    /// `file` made absolute against `workingDirectory`, with `.`, `..` and symbolic links
    /// resolved; the built-in configuration as it is.
    public static func canonicalPath(_ file: String, workingDirectory: String = FileManager.default.currentDirectoryPath) -> String {
        guard file != builtIn else { return builtIn }
        let url = file.hasPrefix("/") ? URL(fileURLWithPath: file) : URL(fileURLWithPath: workingDirectory).appendingPathComponent(file)
        return url.standardizedFileURL.resolvingSymlinksInPath().path
    }
}
