import Foundation
import VeneerConfig

/// `STATE_DIR/run/ENV.admin`: the address the admin API of a running instance listens on.
public struct AdminAddressFile: Sendable {
    /// The file.
    public let path: String

    /// The file of `environment`.
    public init(stateDirectory: String, environment: String) {
        path = stateDirectory + "/run/" + environment + ".admin"
    }

    func write(_ address: ListenAddress) throws {
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try (address.description + "\n").write(toFile: path, atomically: true, encoding: .utf8)
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }

    /// The recorded address, if an instance recorded one.
    public func read() -> ListenAddress? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        return ListenAddress(text.trimmingCharacters(in: .whitespacesAndNewlines))
    }
}
