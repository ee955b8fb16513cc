import NIOCore

extension BodyStream {
    /// A copy of a streamed body kept while it passes (by a ``tap(_:)``): at most `limit`
    /// bytes, dropped for good once the body is longer, so that what a decorator keeps is
    /// bounded by its own option (the cache's `max_entry_size`, record's `max_body`). Touched
    /// on the stream's event loop only.
    public final class Copy: @unchecked Sendable {
        private let limit: Int
        private var buffer: ByteBuffer? = ByteBuffer()

        /// A copy of at most `limit` bytes.
        public init(limit: Int) {
            self.limit = limit
        }

        /// Adds a part, or drops the copy once it would be over the limit.
        public func append(_ part: ByteBuffer) {
            guard var copy = buffer else { return }
            buffer = nil
            guard copy.readableBytes + part.readableBytes <= limit else { return }
            var part = part
            copy.writeBuffer(&part)
            buffer = copy
        }

        /// The copy, if it was kept whole; then it is gone.
        public func take() -> ByteBuffer? {
            defer { buffer = nil }
            return buffer
        }

        /// How many bytes passed in all (touched on the stream's loop only).
        public final class Counter: @unchecked Sendable {
            /// The bytes counted.
            public var bytes = 0
            /// A count at zero.
            public init() {}
        }
    }
}
