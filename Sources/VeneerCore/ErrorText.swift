import Foundation

/// Error text for log lines and messages: what the error says of itself, never a dump of a
/// type's fields (`Foo(bar: ...)`, which can carry what it should not and reads badly).
public enum ErrorText {
    /// The error's `description` when it has one, else its type's name.
    public static func describe(_ error: any Error) -> String {
        // Through Any: the concrete type's own conformance, not one the existential is given.
        if let described = (error as Any) as? any CustomStringConvertible { return described.description }
        if let described = (error as Any) as? any LocalizedError, let text = described.errorDescription { return text }
        return String(describing: type(of: error))
    }
}
