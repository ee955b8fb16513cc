/// One problem found in a configuration, with where it is and which key it concerns.
public struct ConfigDiagnostic: Sendable, Hashable, CustomStringConvertible {
    /// How bad a problem is: an error stops the configuration from being used; a warning
    /// (such as a secret file this machine cannot read) does not.
    public enum Severity: String, Sendable, Hashable {
        /// The configuration cannot be used.
        case error
        /// Worth knowing; the configuration is valid.
        case warning
    }

    /// Where the problem is, when it is in a file.
    public let mark: SourceMark?
    /// The key path, such as `environments.production.chain[1].cache.ttl`; may be empty.
    public let path: String
    /// What is wrong, and how to fix it when that is known.
    public let message: String
    /// Error or warning.
    public let severity: Severity

    /// Creates a diagnostic.
    public init(mark: SourceMark?, path: String, message: String, severity: Severity = .error) {
        self.mark = mark
        self.path = path
        self.message = message
        self.severity = severity
    }

    /// `file:line:column: error: key.path: message`: the form compilers print, which editors
    /// (Vim's quickfix, Emacs' compilation mode, VS Code's problem matchers) jump to. Without a
    /// place, `program: error: message`, as gcc does for a missing file.
    public func report(program: String = "veneer") -> String {
        var text = mark.map { "\($0): " } ?? "\(program): "
        text += "\(severity.rawValue): "
        if !path.isEmpty { text += "\(path): " }
        return text + message
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

    /// Records a warning: reported by `veneer check`, never a reason to refuse the file.
    public func warning(_ mark: SourceMark?, _ path: String, _ message: String) {
        let diagnostic = ConfigDiagnostic(mark: mark, path: path, message: message, severity: .warning)
        if !warnings.contains(diagnostic) { warnings.append(diagnostic) }
    }

    /// The warnings so far, apart from the errors: they never make ``throwIfAny()`` throw.
    public private(set) var warnings: [ConfigDiagnostic] = []

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
    public var sorted: [ConfigDiagnostic] { Self.fileOrder(diagnostics) }

    /// `diagnostics` in file order (those without a place first, otherwise in the order given).
    public static func fileOrder(_ diagnostics: [ConfigDiagnostic]) -> [ConfigDiagnostic] {
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
