import NIOCore
import Synchronization

/// One object per event loop, made on first use and kept for the life of the process (the
/// daemon has one event loop group; a test that makes many groups keeps theirs too). Ask
/// once per connection, not per request: it takes a lock.
public final class PerEventLoop<Value: AnyObject & Sendable>: Sendable {
    private let values = Mutex<[ObjectIdentifier: Value]>([:])
    private let make: @Sendable (any EventLoop) -> Value

    /// A registry that makes each loop's object with `make`.
    public init(_ make: @escaping @Sendable (any EventLoop) -> Value) {
        self.make = make
    }

    /// The object of `eventLoop`.
    public func callAsFunction(_ eventLoop: any EventLoop) -> Value {
        values.withLock { values in
            if let existing = values[ObjectIdentifier(eventLoop)] { return existing }
            let made = make(eventLoop)
            values[ObjectIdentifier(eventLoop)] = made
            return made
        }
    }
}
