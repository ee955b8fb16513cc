import Foundation
import VeneerConfig

/// Which configuration file and which environment: the rules of DESIGN.md.
public enum ConfigLocator {
    /// The configuration used when there is no file anywhere: development with the mock
    /// origin serving the sample posts, a latency log and a memory cache.
    public static let builtInText = """
        version: 1
        environments:
          development:
            listen: 127.0.0.1:8080
            trace: true
            origin:
              mock: { sample: true }
            chain:
              - latency_log
              - cache: { ttl: 30s }
        """

    /// `--config`, else `$VENEER_CONFIG`, else `config/veneer.yaml` if present, else
    /// `/etc/veneer/veneer.yaml` if present, else the built-in configuration.
    public static func source(explicit: String?, variables: [String: String],
                              fileExists: (String) -> Bool = { FileManager.default.fileExists(atPath: $0) }) throws(ConfigError) -> ConfigSource {
        if let explicit { return try ConfigSource.read(explicit) }
        if let fromEnvironment = variables["VENEER_CONFIG"], !fromEnvironment.isEmpty { return try ConfigSource.read(fromEnvironment) }
        for candidate in ["config/veneer.yaml", "/etc/veneer/veneer.yaml"] where fileExists(candidate) {
            return try ConfigSource.read(candidate)
        }
        return ConfigSource(file: "<built-in>", text: builtInText)
    }

    /// `--environment`, else `$VENEER_ENV`, else `development`.
    public static func environment(explicit: String?, variables: [String: String]) -> String {
        if let explicit, !explicit.isEmpty { return explicit }
        if let fromEnvironment = variables["VENEER_ENV"], !fromEnvironment.isEmpty { return fromEnvironment }
        return "development"
    }
}
