import Foundation
import VeneerCore

/// `${VAR}` and `${VAR:-default}` in configuration values, from the process environment.
///
/// `$$` writes a literal `$`; a `$` not followed by `{` stays as it is. `:-` gives the
/// default when the variable is unset or empty, as in the shell.
public enum Interpolation {
    /// Why a value could not be interpolated.
    public struct Failure: Error, Sendable {
        /// One human sentence.
        public let message: String
    }

    /// Replaces every `${...}` of `text`.
    public static func expand(_ text: String, variables: [String: String]) throws(Failure) -> String {
        guard text.contains("$") else { return text }
        var out = ""
        var index = text.startIndex
        while index < text.endIndex {
            let character = text[index]
            guard character == "$" else {
                out.append(character)
                index = text.index(after: index)
                continue
            }
            let next = text.index(after: index)
            if next < text.endIndex, text[next] == "$" {
                out.append("$")
                index = text.index(after: next)
                continue
            }
            guard next < text.endIndex, text[next] == "{" else {
                out.append("$")
                index = next
                continue
            }
            guard let close = text[next...].firstIndex(of: "}") else {
                throw Failure(message: "unterminated '${' in \(quoted(text))")
            }
            let inner = text[text.index(after: next)..<close]
            let name: Substring
            let fallback: Substring?
            if let separator = inner.range(of: ":-") {
                name = inner[..<separator.lowerBound]
                fallback = inner[separator.upperBound...]
            } else {
                name = inner
                fallback = nil
            }
            guard isVariableName(name) else {
                throw Failure(message: "'${\(inner)}' is not a variable reference (use ${NAME} or ${NAME:-default})")
            }
            if let value = variables[String(name)], !(value.isEmpty && fallback != nil) {
                out += value
            } else if let fallback {
                out += fallback
            } else {
                throw Failure(message: "environment variable \(name) is not set (set it, or write ${\(name):-default})")
            }
            index = text.index(after: close)
        }
        return out
    }

    static func isVariableName(_ name: Substring) -> Bool {
        guard let first = name.first, first == "_" || (first.isASCII && first.isLetter) else { return false }
        return name.allSatisfy { $0 == "_" || ($0.isASCII && ($0.isLetter || $0.isNumber)) }
    }
}

/// A value in double quotes for messages, with control characters escaped.
func quoted(_ text: String) -> String {
    var out = "\""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\t": out += "\\t"
        default:
            if scalar.value < 0x20 { out += "\\u{\(String(scalar.value, radix: 16))}" } else { out.unicodeScalars.append(scalar) }
        }
    }
    return out + "\""
}
