import NIOCore

extension BodyStream {
    /// A copy of a streamed body kept while it passes (by a ``tap(_:)``): at most `limit`
    /// bytes, dropped for good once the body is longer, so that what a decorator keeps is
    /// bounded by its own option (the cache's `max_entry_size`, record's `max_body`). Touched
    /// on the stream's event loop only.
    ///
    /// The copy is memory held whole, so it takes its share of `limits.buffered` as it grows:
    /// a copy the budget has no room for is dropped (the answer itself passes, neither delayed
    /// nor cut), and its share is given back when it is taken or dropped.
    public final class Copy: @unchecked Sendable {
        private let limit: Int
        private var buffer: ByteBuffer? = ByteBuffer()
        private var reservation: BufferBudget.Reservation?
        /// Whether the copy was dropped because the budget had no room (not for its own limit).
        public private(set) var droppedOverBudget = false

        /// A copy of at most `limit` bytes, reserved from `budget` as it grows.
        public init(limit: Int, budget: BufferBudget? = nil) {
            self.limit = limit
            reservation = budget?.reserve(0)
        }

        /// Adds a part, or drops the copy once it would be over the limit or the budget.
        public func append(_ part: ByteBuffer) {
            guard var copy = buffer else { return }
            buffer = nil
            guard copy.readableBytes + part.readableBytes <= limit else {
                reservation = nil
                return
            }
            guard reservation?.grow(by: part.readableBytes) ?? true else {
                droppedOverBudget = true
                reservation = nil
                return
            }
            var part = part
            copy.writeBuffer(&part)
            buffer = copy
        }

        /// The copy, if it was kept whole; then it is gone (and its share of the budget with it).
        public func take() -> ByteBuffer? {
            defer {
                buffer = nil
                reservation = nil
            }
            return buffer
        }

        /// The bytes of the budget the copy holds now.
        public var reserved: Int { reservation?.held ?? 0 }

        /// How many bytes passed in all (touched on the stream's loop only).
        public final class Counter: @unchecked Sendable {
            /// The bytes counted.
            public var bytes = 0
            /// A count at zero.
            public init() {}
        }
    }
}
