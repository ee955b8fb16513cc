import Foundation
import VeneerCore

/// Where a configuration comes from.
public struct ConfigSource: Sendable {
    /// The file as the user named it (or `<built-in>`), used in every message.
    public let file: String
    /// The YAML text.
    public let text: String

    /// Creates a source from text.
    public init(file: String, text: String) {
        self.file = file
        self.text = text
    }

    /// Reads a file.
    public static func read(_ path: String) throws(ConfigError) -> ConfigSource {
        guard let data = FileManager.default.contents(atPath: path) else {
            let reason = FileManager.default.fileExists(atPath: path) ? "is not readable" : "does not exist"
            throw ConfigError([ConfigDiagnostic(mark: nil, path: "", message: "\(path): configuration file \(reason)")])
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw ConfigError([ConfigDiagnostic(mark: nil, path: "", message: "\(path): configuration file is not UTF-8 text")])
        }
        return ConfigSource(file: path, text: text)
    }

    /// Whether it came from a file (not the built-in configuration, `<built-in>`).
    public var isFile: Bool { !(file.hasPrefix("<") && file.hasSuffix(">")) }

    /// The folder relative paths in it (`seed`, `rules_file`, log files, `state_dir`) resolve
    /// against: the file's own, made absolute against `workingDirectory`, as Prometheus and
    /// Compose do, so that it means the same from any directory and under systemd. The
    /// built-in configuration, which has no file, uses `workingDirectory`.
    public func baseDirectory(workingDirectory: String) -> String {
        guard isFile else { return workingDirectory }
        let absolute = file.hasPrefix("/") ? file : resolve(path: file, against: workingDirectory)
        guard let slash = absolute.lastIndex(of: "/") else { return workingDirectory }
        let folder = String(absolute[..<slash])
        return URL(fileURLWithPath: folder.isEmpty ? "/" : folder).standardizedFileURL.path
    }
}

/// A parsed configuration file: the YAML tree, checked at the top level, with `extends`
/// resolved per environment on demand.
public struct ConfigDocument: Sendable {
    /// The top-level keys.
    public static let topLevelKeys = ["version", "state_dir", "stores", "environments"]
    /// Whether a top-level key is an extension of the file's own (`x-defaults:`), ignored.
    public static func isExtension(_ key: String) -> Bool { key.hasPrefix("x-") }

    /// The keys of an environment.
    public static let environmentKeys = ["extends", "listen", "socket", "admin", "resources", "limits", "origin", "chain", "drain_timeout", "idle_timeout",
                                                "allowed_hosts", "allowed_origins", "pass_forwarding_headers", "access_log", "trace", "peer_identity", "telemetry"]

    /// Where it came from.
    public let source: ConfigSource
    /// The root mapping.
    public let root: ConfigNode.Mapping
    /// Problems of the file as a whole (top-level keys, environment keys), reported with
    /// those of whichever environment is decoded.
    public let structuralProblems: [ConfigDiagnostic]

    /// Parses `source` (throwing YAML syntax errors) and notes the problems that can be
    /// found without choosing an environment.
    public init(source: ConfigSource) throws(ConfigError) {
        self.source = source
        let sink = DiagnosticSink()
        let node = try YAMLLoader.load(source.text, file: source.file)
        guard case .mapping(let root)? = node else {
            let mark = node?.mark ?? SourceMark(file: source.file, line: 1, column: 1)
            throw ConfigError([ConfigDiagnostic(mark: mark, path: "", message: "the configuration must be a mapping with 'environments'")])
        }
        self.root = root
        let context = DecodingContext(sink: sink, variables: [:], baseDirectory: "")
        // Top-level keys that start with `x-` are the file's own (a place for YAML anchors),
        // ignored as Compose files ignore theirs.
        let own = ConfigNode.Mapping(entries: root.entries.filter { !Self.isExtension($0.key.value) }, mark: root.mark)
        _ = ConfigValue(node: .mapping(own), path: "", context: context).mapping(allowedKeys: Self.topLevelKeys)
        if let version = root.entry("version") {
            let versionValue = ConfigValue(node: version.value, path: "version", context: context)
            if let number = versionValue.int(in: 0...Int.max), number != 1 {
                versionValue.error("version \(number) is not supported; this Veneer reads version 1")
            }
        }
        if let environments = root["environments"] {
            let environmentsValue = ConfigValue(node: environments, path: "environments", context: context)
            if let mapping = environmentsValue.mapping(allowedKeys: nil) {
                if mapping.keys.isEmpty { environmentsValue.error("no environments are defined") }
                for entry in mapping.entries {
                    _ = entry.value.mapping(allowedKeys: Self.environmentKeys)
                }
            }
        } else {
            sink.error(root.mark, "environments", "required: a mapping of environment names to their origin and chain")
        }
        structuralProblems = sink.sorted
    }

    /// The environment names, in file order.
    public var environmentNames: [String] {
        guard case .mapping(let environments)? = root["environments"] else { return [] }
        return environments.keys
    }

    /// The environment `name` with every `extends` merged in (deep merge of mappings; lists
    /// and scalars of the extending environment replace inherited ones), without `extends`.
    public func resolvedEnvironment(_ name: String, sink: DiagnosticSink) -> ConfigNode.Mapping? {
        guard case .mapping(let environments)? = root["environments"] else { return nil }
        guard environments[name] != nil else {
            let hint = Suggestions.hint(for: name, in: environments.keys)
            sink.error(nil, "", "\(source.file): no environment '\(name)'\(hint) (defined: \(environments.keys.joined(separator: ", ")))")
            return nil
        }
        return resolve(name, in: environments, chain: [], sink: sink)
    }

    private func resolve(_ name: String, in environments: ConfigNode.Mapping, chain: [String], sink: DiagnosticSink) -> ConfigNode.Mapping? {
        var own: ConfigNode.Mapping
        switch environments[name] {
        case .mapping(let mapping)?:
            own = mapping
        case .scalar(let scalar)? where scalar.isNull:
            // `production:` with nothing under it is an empty mapping, as everywhere else: what
            // it lacks is then reported (it was decoded to nothing, silently, and `run` crashed).
            own = ConfigNode.Mapping(entries: [], mark: scalar.mark)
        default:
            return nil  // the structural check reported "expected a mapping"
        }
        guard let extendsEntry = own.entry("extends") else { return own }
        own.entries.removeAll { $0.key.value == "extends" }
        let path = "environments.\(name).extends"
        guard case .scalar(let parentScalar) = extendsEntry.value, !parentScalar.isNull else {
            sink.error(extendsEntry.value.mark, path, "expected the name of another environment")
            return nil
        }
        let parent = parentScalar.value
        if parent == name || chain.contains(parent) {
            // Told once, however many environments lead into it: from the member that comes
            // first in the file, at its own `extends`.
            let members = Array((chain + [name]).drop { $0 != parent })
            let order = environments.keys
            let first = members.indices.min { order.firstIndex(of: members[$0])! < order.firstIndex(of: members[$1])! }!
            let rotated = Array(members[first...] + members[..<first])
            let firstExtends = environments[rotated[0]].flatMap { node -> ConfigNode? in
                guard case .mapping(let mapping) = node else { return nil }
                return mapping["extends"]
            }
            sink.error(firstExtends?.mark ?? parentScalar.mark, "environments.\(rotated[0]).extends",
                       "'extends' forms a cycle: \((rotated + [rotated[0]]).joined(separator: " -> "))")
            return nil
        }
        guard environments[parent] != nil else {
            let hint = Suggestions.hint(for: parent, in: environments.keys.filter { $0 != name })
            sink.error(parentScalar.mark, path, "no environment '\(parent)' to extend\(hint)")
            return nil
        }
        guard let base = resolve(parent, in: environments, chain: chain + [name], sink: sink) else { return nil }
        return Self.merge(base: base, over: own)
    }

    /// Deep merge: mappings key by key, anything else replaced whole.
    static func merge(base: ConfigNode.Mapping, over: ConfigNode.Mapping) -> ConfigNode.Mapping {
        var result = base
        result.mark = over.mark
        for entry in over.entries {
            if let index = result.entries.firstIndex(where: { $0.key.value == entry.key.value }) {
                if case .mapping(let baseChild) = result.entries[index].value, case .mapping(let overChild) = entry.value {
                    result.entries[index] = .init(key: entry.key, value: .mapping(merge(base: baseChild, over: overChild)))
                } else {
                    result.entries[index] = entry
                }
            } else {
                result.entries.append(entry)
            }
        }
        return result
    }
}
