/// libyaml's syntax messages as a person editing the file needs them: what is wrong in
/// the file's own terms (a tab, a quote never closed, a line out of alignment) and how to fix
/// it, instead of the parser's state ("did not find expected key while parsing a block mapping").
enum SyntaxHint {
    /// The message for libyaml's `problem` (and `context`), and whether it belongs at the
    /// context mark (where the unclosed thing opened) rather than at the problem mark.
    /// `character` is the byte at the problem mark, `opening` the one at the context mark.
    static func reword(problem: String, context: String?, character: UInt8?, opening: UInt8?,
                       contextLine: Int, contextColumn: Int) -> (message: String, atContext: Bool) {
        let opened = "line \(contextLine), column \(contextColumn)"
        switch (problem, context) {
        case ("found character that cannot start any token", _) where character == UInt8(ascii: "\t"):
            return ("a tab character; YAML indents with spaces only (replace the tab with spaces)", false)
        case ("found character that cannot start any token", _):
            let shown = character.map { " '\(String(decoding: [$0], as: UTF8.self))'" } ?? ""
            return ("a value cannot start with\(shown); put the value in quotes", false)
        case ("found unexpected end of stream", "while scanning a quoted scalar"):
            let quote = opening == UInt8(ascii: "'") ? "'" : "\""
            return ("the quoted text that starts here is never closed (add the closing \(quote))", true)
        case ("found unknown escape character", _):
            return ("unknown escape sequence in a double-quoted text; write \\\\ for a backslash, or use single quotes", false)
        case ("mapping values are not allowed in this context", _):
            return ("unexpected ':'; a value that contains ': ' must be quoted, or this line is indented too far", false)
        case ("did not find expected key", "while parsing a block mapping"):
            return ("bad indentation: this line does not line up with the keys of the mapping that starts at \(opened)", false)
        case ("did not find expected '-' indicator", _):
            return ("bad indentation: expected a list item ('- ') lined up with the list that starts at \(opened)", false)
        case ("did not find expected ',' or '}'", _):
            return ("the '{' at \(opened) is not closed: a '}' (or a ',' between entries) is missing", false)
        case ("did not find expected ',' or ']'", _):
            return ("the '[' at \(opened) is not closed: a ']' (or a ',' between items) is missing", false)
        case ("could not find expected ':'", "while scanning a simple key"):
            return ("a key without ':' (write 'key: value'), or a text that goes on over several lines without quotes", true)
        case ("found undefined alias", _):
            return ("an alias (*name) that no anchor (&name) before it defines", false)
        case ("did not find expected node content", _), ("found unexpected end of stream", _):
            return ("a value is missing here (the file may end too early, or a bracket is not closed)", false)
        default:
            var message = problem
            if let context { message += " (\(context) at \(opened))" }
            return (message, false)
        }
    }
}
