import VeneerCore

/// What every value being decoded shares: the diagnostics, the environment variables
/// used for `${VAR}`, and the folder that relative file paths resolve against.
public final class DecodingContext {
    /// Where problems go.
    public let sink: DiagnosticSink
    /// The process environment for interpolation.
    public let variables: [String: String]
    /// The folder relative file paths are resolved against: the configuration file's own
    /// (see ``ConfigSource/baseDirectory(workingDirectory:)``).
    public let baseDirectory: String
    /// The named stores that options may refer to (set while an environment is decoded).
    var stores: StoreCatalog?
    /// Every number read (a duration, size, count or percentage), by key path, with its
    /// bounds: what the table of bounds in the README is checked against.
    public internal(set) var numbers: [(path: String, bounds: String)] = []

    /// Creates a context; relative paths resolve against `baseDirectory`.
    public init(sink: DiagnosticSink = DiagnosticSink(), variables: [String: String], baseDirectory: String) {
        self.sink = sink
        self.variables = variables
        self.baseDirectory = baseDirectory
    }
}

/// One node being decoded, with its key path; the typed getters record problems instead of
/// throwing, so that decoding goes on and every problem is reported at once.
public struct ConfigValue {
    /// The node.
    public let node: ConfigNode
    /// Its key path, such as `environments.production.chain[1].cache.ttl`.
    public let path: String
    /// The shared decoding state.
    public let context: DecodingContext

    /// Creates a value.
    public init(node: ConfigNode, path: String, context: DecodingContext) {
        self.node = node
        self.path = path
        self.context = context
    }

    /// Where the node starts.
    public var mark: SourceMark { node.mark }

    /// Records a problem with this value.
    public func error(_ message: String) {
        context.sink.error(node.mark, path, message)
    }

    /// Whether the node is YAML null (or empty).
    public var isNull: Bool { node.isNull }

    /// The scalar text with `${VAR}` expanded; records an error and returns nil for
    /// anything else. `what` names the expected type in the message.
    public func scalarText(_ what: String = "a text value") -> String? {
        guard case .scalar(let scalar) = node, !scalar.isNull else {
            error("expected \(what), found \(node.kindDescription)")
            return nil
        }
        do {
            return try Interpolation.expand(scalar.value, variables: context.variables)
        } catch {
            self.error(error.message)
            return nil
        }
    }

    /// A non-empty string.
    public func string() -> String? {
        guard let text = scalarText() else { return nil }
        if text.isEmpty { error("must not be empty"); return nil }
        return text
    }

    /// An integer in `range`.
    public func int(in range: ClosedRange<Int>) -> Int? {
        guard let text = scalarText("an integer") else { return nil }
        return number(text, Bounded<Counts>(range), what: "an integer")
    }

    /// `true` or `false`.
    public func bool() -> Bool? {
        guard let text = scalarText("true or false") else { return nil }
        switch text {
        case "true", "True", "TRUE": return true
        case "false", "False", "FALSE": return false
        default: error("\(quoted(text)) is not true or false"); return nil
        }
    }

    /// A duration such as `250ms`, `30s`, `5m`, `1h` within `bounds`.
    public func duration(in bounds: Bounded<Durations>) -> Duration? {
        guard let text = scalarText("a duration") else { return nil }
        return number(text, bounds, what: "a duration (use e.g. 30s, 5m, 1h)")
    }

    /// A size such as `512KB`, `10MB` or a number of bytes within `bounds`.
    public func size(in bounds: Bounded<Sizes>) -> Int? {
        guard let text = scalarText("a size") else { return nil }
        return number(text, bounds, what: "a size (use e.g. 512KB, 10MB, 1GB)")
    }

    /// A percentage such as `10`, `12.5` or `50%` within `bounds`.
    public func percentage(in bounds: Bounded<Percentages>) -> Double? {
        guard let text = scalarText("a percentage") else { return nil }
        return number(text, bounds, what: "a percentage (use e.g. 10 or 12.5%)")
    }

    private func number<Kind: QuantityKind>(_ text: String, _ bounds: Bounded<Kind>, what: String) -> Kind.Value? {
        context.numbers.append((path, bounds.description))
        switch bounds.parse(text) {
        case .success(let value): return value
        case .failure(.malformed): error("\(quoted(text)) is not \(what)")
        case .failure(.outOfRange(let range, _)): error("\(text.trimmingSpaces) is out of range (\(range))")
        }
        return nil
    }

    /// One of `choices`.
    public func choice(_ choices: [String]) -> String? {
        guard let text = scalarText("one of \(choices.joined(separator: ", "))") else { return nil }
        guard choices.contains(text) else {
            error("\(quoted(text)) is not one of \(choices.joined(separator: ", "))\(Suggestions.hint(for: text, in: choices))")
            return nil
        }
        return text
    }

    /// A file path, resolved against the configuration file's folder when relative.
    public func filePath() -> String? {
        guard let text = string() else { return nil }
        return resolve(path: text, against: context.baseDirectory)
    }

    /// The items of a list.
    public func list() -> [ConfigValue]? {
        guard case .sequence(let sequence) = node else {
            error("expected a list, found \(node.kindDescription)")
            return nil
        }
        return sequence.items.enumerated().map { ConfigValue(node: $1, path: "\(path)[\($0)]", context: context) }
    }

    /// A list of strings; a single string is taken as a list of one.
    public func stringList() -> [String]? {
        if case .scalar(let scalar) = node, !scalar.isNull { return string().map { [$0] } }
        return list()?.compactMap { $0.string() }
    }

    /// A mapping whose keys must be among `allowedKeys`; null reads as an empty mapping.
    /// Unknown keys are reported with a "did you mean".
    public func mapping(allowedKeys: [String]?) -> ConfigMapping? {
        switch node {
        case .mapping(let mapping):
            if let allowedKeys {
                for entry in mapping.entries where !allowedKeys.contains(entry.key.value) {
                    let hint = Suggestions.hint(for: entry.key.value, in: allowedKeys)
                    let known = allowedKeys.isEmpty ? "takes no options" : "known: \(allowedKeys.joined(separator: ", "))"
                    context.sink.error(entry.key.mark, childPath(entry.key.value), "unknown key '\(entry.key.value)'\(hint)" + (hint.isEmpty ? " (\(known))" : ""))
                }
            }
            return ConfigMapping(mapping: mapping, value: self)
        case .scalar(let scalar) where scalar.isNull:
            return ConfigMapping(mapping: .init(entries: [], mark: scalar.mark), value: self)
        default:
            error("expected a mapping, found \(node.kindDescription)")
            return nil
        }
    }

    /// The key path of a child key.
    public func childPath(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }
}

/// A mapping being decoded. Every getter records what it resolved (the default when the
/// key is absent), which becomes the options summary of `veneer chain` and `/-/chain`.
public final class ConfigMapping {
    /// The mapping node.
    public let mapping: ConfigNode.Mapping
    /// The mapping as a value (path, context).
    public let value: ConfigValue
    /// What was read, in reading order, for display; secrets appear redacted.
    public private(set) var summary: [(String, JSONValue)] = []

    init(mapping: ConfigNode.Mapping, value: ConfigValue) {
        self.mapping = mapping
        self.value = value
    }

    /// The value of `key`, if present and not null.
    public subscript(key: String) -> ConfigValue? {
        guard let node = mapping[key], !node.isNull else { return nil }
        return ConfigValue(node: node, path: value.childPath(key), context: value.context)
    }

    /// Whether `key` is written (even as null).
    public func contains(_ key: String) -> Bool { mapping[key] != nil }

    /// The keys, in file order.
    public var keys: [String] { mapping.keys }

    /// Every entry with its value, for mappings with free keys (header names, store names).
    public var entries: [(key: String, mark: SourceMark, value: ConfigValue)] {
        mapping.entries.map { ($0.key.value, $0.key.mark, ConfigValue(node: $0.value, path: value.childPath($0.key.value), context: value.context)) }
    }

    /// Records a problem with the mapping itself.
    public func error(_ message: String) { value.error(message) }

    /// Records a problem with `key` (at its value, or at the mapping when absent).
    public func error(_ key: String, _ message: String) {
        let mark = mapping[key]?.mark ?? mapping.mark
        value.context.sink.error(mark, value.childPath(key), message)
    }

    /// The value of a key that must be present.
    public func required(_ key: String) -> ConfigValue? {
        if let child = self[key] { return child }
        value.context.sink.error(mapping.mark, value.childPath(key), "required")
        return nil
    }

    /// Records a summary line (for values read through ``subscript(_:)`` directly).
    public func note(_ key: String, _ display: JSONValue) {
        summary.removeAll { $0.0 == key }
        summary.append((key, display))
    }

    // MARK: Typed getters with defaults

    /// A string, or `defaultValue` when absent.
    public func string(_ key: String, default defaultValue: String? = nil, required: Bool = false) -> String? {
        let result = (required ? self.required(key) : self[key]).map { $0.string() } ?? defaultValue
        if let result { note(key, .string(result)) }
        return result
    }

    /// A file path (relative paths resolve against the working directory).
    public func filePath(_ key: String, required: Bool = false) -> String? {
        let result = (required ? self.required(key) : self[key])?.filePath()
        if let result { note(key, .string(result)) }
        return result
    }

    /// An integer in `range`, or `defaultValue`.
    public func int(_ key: String, default defaultValue: Int? = nil, in range: ClosedRange<Int>) -> Int? {
        let result = self[key].map { $0.int(in: range) } ?? defaultValue
        if let result { note(key, .int(result)) }
        return result
    }

    /// A boolean, or `defaultValue`.
    public func bool(_ key: String, default defaultValue: Bool) -> Bool {
        let result = self[key]?.bool() ?? defaultValue
        note(key, .bool(result))
        return result
    }

    /// A duration within `bounds`, or `defaultValue`.
    public func duration(_ key: String, default defaultValue: Duration? = nil, required: Bool = false, in bounds: Bounded<Durations>) -> Duration? {
        let result = (required ? self.required(key) : self[key]).map { $0.duration(in: bounds) } ?? defaultValue
        if let result { note(key, .string(Units.format(result))) }
        return result
    }

    /// A size within `bounds`, or `defaultValue`.
    public func size(_ key: String, default defaultValue: Int? = nil, in bounds: Bounded<Sizes>) -> Int? {
        let result = self[key].map { $0.size(in: bounds) } ?? defaultValue
        if let result { note(key, .string(Units.format(bytes: result))) }
        return result
    }

    /// One of `choices`, or `defaultValue`.
    public func choice(_ key: String, _ choices: [String], default defaultValue: String) -> String {
        let result = self[key]?.choice(choices) ?? defaultValue
        note(key, .string(result))
        return result
    }

    /// A list of strings (a single string counts as a list of one), or `[]`.
    public func stringList(_ key: String) -> [String] {
        let result = self[key]?.stringList() ?? []
        if contains(key) { note(key, .array(result.map(JSONValue.string))) }
        return result
    }

    /// A secret given inline as `key` or read from a file as `key_file`, never both.
    /// The file is read when the chain is built, not while decoding.
    public func secret(_ key: String, required: Bool = false) -> Secret? {
        let inline = self[key]
        let file = self["\(key)_file"]
        switch (inline, file) {
        case (let inline?, nil):
            guard let text = inline.scalarText() else { return nil }
            note(key, .string(Secret.redacted))
            return .value(text)
        case (nil, let file?):
            guard let path = file.filePath() else { return nil }
            note("\(key)_file", .string(path))
            // Read when the chain is built; a machine that only checks the file (a laptop,
            // CI) seldom holds the credentials, so this is a warning, not an error.
            do {
                _ = try Secret.file(path).reveal()
            } catch {
                value.context.sink.warning(file.mark, file.path, "\(error) (veneer run reads it when it builds the chain, and stops if it cannot)")
            }
            return .file(path)
        case (_?, _?):
            error("\(key)_file", "give either '\(key)' or '\(key)_file', not both")
            return nil
        case (nil, nil):
            if required { value.context.sink.error(mapping.mark, value.childPath(key), "required (or '\(key)_file')") }
            return nil
        }
    }

    /// A nested mapping with its own allowed keys.
    public func mapping(_ key: String, allowedKeys: [String]?) -> ConfigMapping? {
        self[key]?.mapping(allowedKeys: allowedKeys)
    }
}

/// `path` made absolute against `directory` when it is relative.
public func resolve(path: String, against directory: String) -> String {
    if path.hasPrefix("/") || directory.isEmpty { return path }
    var base = directory
    while base.count > 1 && base.hasSuffix("/") { base.removeLast() }
    var rest = Substring(path)
    while rest.hasPrefix("./") { rest = rest.dropFirst(2) }
    return base == "/" ? "/" + rest : base + "/" + rest
}
