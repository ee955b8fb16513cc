/// Where something is in a configuration file; line and column start at 1.
public struct SourceMark: Hashable, Sendable, CustomStringConvertible {
    /// The file as the user named it.
    public let file: String
    /// 1-based line.
    public let line: Int
    /// 1-based column.
    public let column: Int

    /// Creates a mark.
    public init(file: String, line: Int, column: Int) {
        self.file = file
        self.line = line
        self.column = column
    }

    /// `file:line:column`.
    public var description: String { "\(file):\(line):\(column)" }
}

/// A YAML node with the place it came from. Aliases are already resolved and merge keys
/// (`<<`) already applied, so decoding never sees either.
public indirect enum ConfigNode: Sendable {
    /// A scalar, with its text and whether it was quoted.
    case scalar(Scalar)
    /// A mapping whose keys are scalars, in file order, without duplicates.
    case mapping(Mapping)
    /// A sequence.
    case sequence(Sequence)

    /// A scalar node.
    public struct Scalar: Sendable {
        /// The text.
        public var value: String
        /// Whether it was written quoted or as a block (then it is never null, a number or a bool).
        public var quoted: Bool
        /// Where it starts.
        public var mark: SourceMark

        /// Creates a scalar.
        public init(value: String, quoted: Bool, mark: SourceMark) {
            self.value = value
            self.quoted = quoted
            self.mark = mark
        }

        /// Whether this is YAML's null: empty, `~` or `null`, unquoted.
        public var isNull: Bool {
            !quoted && (value.isEmpty || value == "~" || value == "null" || value == "Null" || value == "NULL")
        }
    }

    /// A mapping node.
    public struct Mapping: Sendable {
        /// One key and its value.
        public struct Entry: Sendable {
            /// The key.
            public var key: Scalar
            /// The value.
            public var value: ConfigNode
        }
        /// Entries in file order.
        public var entries: [Entry]
        /// Where it starts.
        public var mark: SourceMark

        /// The value of `key`, if present.
        public subscript(key: String) -> ConfigNode? {
            entries.first { $0.key.value == key }?.value
        }

        /// The entry of `key`, if present.
        public func entry(_ key: String) -> Entry? {
            entries.first { $0.key.value == key }
        }

        /// The keys, in order.
        public var keys: [String] { entries.map(\.key.value) }
    }

    /// A sequence node.
    public struct Sequence: Sendable {
        /// The items.
        public var items: [ConfigNode]
        /// Where it starts.
        public var mark: SourceMark
    }

    /// Where the node starts.
    public var mark: SourceMark {
        switch self {
        case .scalar(let scalar): return scalar.mark
        case .mapping(let mapping): return mapping.mark
        case .sequence(let sequence): return sequence.mark
        }
    }

    /// What kind of node this is, for error messages.
    public var kindDescription: String {
        switch self {
        case .scalar(let scalar): return scalar.isNull ? "null" : "a scalar"
        case .mapping: return "a mapping"
        case .sequence: return "a list"
        }
    }

    /// Whether this is a null scalar.
    public var isNull: Bool {
        if case .scalar(let scalar) = self { return scalar.isNull }
        return false
    }
}
