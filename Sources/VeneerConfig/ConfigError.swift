/// One problem found in a configuration, with where it is and which key it concerns.
public struct ConfigDiagnostic: Sendable, Hashable, CustomStringConvertible {
    /// Where the problem is, when it is in a file.
    public let mark: SourceMark?
    /// The key path, such as `environments.production.chain[1].cache.ttl`; may be empty.
    public let path: String
    /// What is wrong, and how to fix it when that is known.
    public let message: String

    /// Creates a diagnostic.
    public init(mark: SourceMark?, path: String, message: String) {
        self.mark = mark
        self.path = path
        self.message = message
    }

    /// `file:line:column: key.path: message`.
    public var description: String {
        var text = ""
        if let mark { text += "\(mark): " }
        if !path.isEmpty { text += "\(path): " }
        return text + message
    }
}

/// All the problems found in a configuration, reported together.
public struct ConfigError: Error, Sendable, CustomStringConvertible {
    /// The problems, in file order.
    public let diagnostics: [ConfigDiagnostic]

    /// Creates an error from its problems.
    public init(_ diagnostics: [ConfigDiagnostic]) {
        self.diagnostics = diagnostics
    }

    /// One diagnostic per line.
    public var description: String { diagnostics.map(\.description).joined(separator: "\n") }
}

/// Collects diagnostics while a configuration is decoded, so that all are reported at once.
public final class DiagnosticSink {
    /// The problems so far.
    public private(set) var diagnostics: [ConfigDiagnostic] = []

    /// An empty sink.
    public init() {}

    /// Records a problem.
    public func error(_ mark: SourceMark?, _ path: String, _ message: String) {
        let diagnostic = ConfigDiagnostic(mark: mark, path: path, message: message)
        if !diagnostics.contains(diagnostic) { diagnostics.append(diagnostic) }
    }

    /// Records problems found elsewhere.
    public func append(contentsOf other: [ConfigDiagnostic]) {
        for diagnostic in other where !diagnostics.contains(diagnostic) { diagnostics.append(diagnostic) }
    }

    /// Whether anything is wrong.
    public var hasErrors: Bool { !diagnostics.isEmpty }

    /// Throws all problems, sorted by file position, if there are any.
    public func throwIfAny() throws(ConfigError) {
        guard hasErrors else { return }
        throw ConfigError(sorted)
    }

    /// The problems in file order (those without a place first).
    public var sorted: [ConfigDiagnostic] {
        diagnostics.enumerated().sorted { lhs, rhs in
            switch (lhs.element.mark, rhs.element.mark) {
            case (nil, nil): return lhs.offset < rhs.offset
            case (nil, _): return true
            case (_, nil): return false
            case (let a?, let b?):
                if a.file != b.file { return lhs.offset < rhs.offset }
                return (a.line, a.column, lhs.offset) < (b.line, b.column, rhs.offset)
            }
        }.map(\.element)
    }
}
