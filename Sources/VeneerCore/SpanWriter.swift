/// OTLP's `Span` message in protobuf's wire format (opentelemetry-proto `trace/v1/trace.proto`),
/// written by unchecked stores from `base` on into memory the caller made large enough: a
/// ``SpanNote`` (``span(_:)``, at most ``bound(of:)`` bytes), or a request's server span and
/// its children straight from what the edge and the ``RequestRecord`` hold (``serverSpan(_:)``,
/// ``RequestRecord/exportSpans(server:to:)``): no attribute array or ``SpanNote`` is built for
/// them, the most of what a sampled request cost (callgrind). Both write the same bytes for the
/// same span. The exporter (VeneerRuntime) writes the envelope around the spans.
///
/// Field numbers are the .proto's. A nested message's length is a 5-byte varint written after
/// it (a padded varint, which the wire format allows), so nothing is built apart and copied.
public struct SpanWriter {
    let base: UnsafeMutablePointer<UInt8>
    /// How many bytes are written.
    package private(set) var count = 0

    /// A writer at `base`.
    package init(base: UnsafeMutablePointer<UInt8>) {
        self.base = base
    }

    // MARK: Spans

    /// At most how many bytes ``span(_:)`` writes for `span`, with its field's tag and
    /// length: fixed fields 64 bytes (ids 2 + 16, 2 + 8, 2 + 8; kind 2; times 2 × 9; the
    /// nested length 6), a string field 6 bytes more than its text, an attribute 29 more than
    /// its key and text, the status 14 more than its message.
    package static func bound(of span: SpanNote) -> Int {
        var total = fixedBound + 6 + span.name.utf8.count
        if let state = span.traceState { total += 6 + state.utf8.count }
        for (key, value) in span.attributes {
            total += 29 + key.utf8.count
            if case .string(let text) = value { total += text.utf8.count }
        }
        if let error = span.error { total += 14 + error.utf8.count }
        return total
    }

    /// A span's fixed fields with its tag and length (``bound(of:)``).
    package static let fixedBound = 64

    /// `span` as a `ScopeSpans.spans` field: its tag, a padded length, the `Span`.
    package mutating func span(_ span: SpanNote) {
        nested(2) { writer in
            writer.head(traceID: span.traceID, spanID: span.spanID, traceState: span.traceState, parentSpanID: span.parentSpanID)
            writer.string(5, span.name)                                                      // name
            writer.times(kind: span.kind, start: span.start, end: span.end)
            for (key, value) in span.attributes { writer.attribute(9, key, value) }          // attributes
            if let error = span.error { writer.status(error) }
        }
    }

    /// The fields before a span's name.
    package mutating func head(traceID: TraceContext.TraceID, spanID: UInt64, traceState: String?, parentSpanID: UInt64?) {
        tag(1, 2)                                                                            // trace_id
        byte(16)
        bigEndian(traceID.high)
        bigEndian(traceID.low)
        tag(2, 2)                                                                            // span_id
        byte(8)
        bigEndian(spanID)
        if let traceState { string(3, traceState) }                                          // trace_state
        if let parentSpanID {                                                                // parent_span_id
            tag(4, 2)
            byte(8)
            bigEndian(parentSpanID)
        }
    }

    /// The fields after a span's name.
    package mutating func times(kind: SpanNote.Kind, start: Int64, end: Int64) {
        varint(6, UInt64(kind.rawValue))                                                     // kind
        fixed64(7, UInt64(max(0, start)))                                                    // start_time_unix_nano
        fixed64(8, UInt64(max(0, end)))                                                      // end_time_unix_nano
    }

    /// An error status with `message`.
    package mutating func status(_ message: String) {
        nested(15) { status in                                                               // status
            status.string(2, message)                                                        // Status.message
            status.varint(3, 2)                                                              // Status.code: STATUS_CODE_ERROR
        }
    }

    // MARK: Attributes

    /// A `KeyValue` with its `AnyValue`, as field `field`: both lengths computed first and
    /// written exactly (the most frequent message, a span's dozen attributes: no
    /// placeholder to patch, and eight bytes fewer each).
    package mutating func attribute(_ field: Int, _ key: String, _ value: SpanNote.Value) {
        switch value {
        case .string(let text): Self.withBytes(key) { key in Self.withBytes(text) { stringAttribute(field, key, $0) } }
        case .bool(let flag): Self.withBytes(key) { scalarAttribute(field, $0, field: 2, UInt64(flag ? 1 : 0)) }        // bool_value
        case .int(let number): Self.withBytes(key) { scalarAttribute(field, $0, field: 3, UInt64(bitPattern: number)) } // int_value
        }
    }

    /// A span's string attribute (`Span.attributes`) of a key known when compiling: no key
    /// string is made or counted. (Concrete types, here and below: called from another
    /// module, a `some StringProtocol` went through its protocol witnesses, a third of what a
    /// sampled hit cost; callgrind.)
    package mutating func attribute(_ key: StaticString, _ text: String) {
        key.withUTF8Buffer { key in Self.withBytes(text) { stringAttribute(9, key, $0) } }
    }

    /// A span's string attribute of a substring.
    package mutating func attribute(_ key: StaticString, _ text: Substring) {
        key.withUTF8Buffer { key in Self.withBytes(text) { stringAttribute(9, key, $0) } }
    }

    /// A span's integer attribute.
    package mutating func attribute(_ key: StaticString, int value: Int64) {
        key.withUTF8Buffer { scalarAttribute(9, $0, field: 3, UInt64(bitPattern: value)) }
    }

    /// A string attribute (`AnyValue.string_value`) of `key` and `text`'s bytes, as field `field`.
    package mutating func stringAttribute(_ field: Int, _ key: UnsafeBufferPointer<UInt8>, _ text: UnsafeBufferPointer<UInt8>) {
        stringAttribute(field, key, length: text.count) { $0.raw(text) }
    }

    /// A string attribute whose `length` bytes of text `text` writes (pieces of one value).
    package mutating func stringAttribute(_ field: Int, _ key: UnsafeBufferPointer<UInt8>, length: Int, _ text: (inout SpanWriter) -> Void) {
        let anyLength = 1 + Self.varintSize(UInt64(length)) + length
        keyValueHead(field, key, anyLength: anyLength)
        tag(1, 2)                                                                            // string_value
        rawVarint(UInt64(length))
        text(&self)
    }

    /// A varint attribute (`AnyValue` field `valueField`: 2 bool, 3 int) of `key`, as field `field`.
    package mutating func scalarAttribute(_ field: Int, _ key: UnsafeBufferPointer<UInt8>, field valueField: Int, _ value: UInt64) {
        keyValueHead(field, key, anyLength: 1 + Self.varintSize(value))
        varint(valueField, value)
    }

    /// A `KeyValue`'s tag and length, its key, and its value's tag and length.
    @inline(__always)
    private mutating func keyValueHead(_ field: Int, _ key: UnsafeBufferPointer<UInt8>, anyLength: Int) {
        let total = 2 + key.count + 2 + anyLength
        if field < 16, total < 0x80 {
            // Every length one byte (a span's attributes but a long value): six stores and the key.
            let at = base + count
            at[0] = UInt8(truncatingIfNeeded: field << 3 | 2)
            at[1] = UInt8(truncatingIfNeeded: total)
            at[2] = 0x0A                                                                     // KeyValue.key
            at[3] = UInt8(truncatingIfNeeded: key.count)
            if let from = key.baseAddress { (at + 4).update(from: from, count: key.count) }
            at[4 + key.count] = 0x12                                                         // KeyValue.value
            at[5 + key.count] = UInt8(truncatingIfNeeded: anyLength)
            count += 6 + key.count
            return
        }
        tag(field, 2)
        rawVarint(UInt64(1 + Self.varintSize(UInt64(key.count)) + key.count + 1 + Self.varintSize(UInt64(anyLength)) + anyLength))
        tag(1, 2)                                                                            // KeyValue.key
        rawVarint(UInt64(key.count))
        raw(key)
        tag(2, 2)                                                                            // KeyValue.value
        rawVarint(UInt64(anyLength))
    }

    // MARK: The wire format

    /// How many bytes `value` takes as a varint.
    package static func varintSize(_ value: UInt64) -> Int {
        value == 0 ? 1 : (64 - value.leadingZeroBitCount + 6) / 7
    }

    /// `text`'s UTF-8 bytes, without copying a native string.
    @inline(__always)
    static func withBytes<R>(_ text: some StringProtocol, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        if let result = text.utf8.withContiguousStorageIfAvailable(body) { return result }
        var copy = String(text)
        return copy.withUTF8(body)
    }

    /// One byte.
    @inline(__always)
    package mutating func byte(_ value: UInt8) {
        base[count] = value
        count += 1
    }

    /// `bytes` as they are.
    @inline(__always)
    package mutating func raw(_ bytes: UnsafeBufferPointer<UInt8>) {
        if let from = bytes.baseAddress { (base + count).update(from: from, count: bytes.count) }
        count += bytes.count
    }

    /// A varint without a tag (a length).
    @inline(__always)
    package mutating func rawVarint(_ value: UInt64) {
        if value < 0x80 {
            byte(UInt8(truncatingIfNeeded: value))
        } else {
            longVarint(value)
        }
    }

    /// A varint of two bytes or more.
    private mutating func longVarint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            byte(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        byte(UInt8(value))
    }

    /// 8 bytes, most significant first (an id).
    package mutating func bigEndian(_ value: UInt64) {
        UnsafeMutableRawPointer(base + count).storeBytes(of: value.bigEndian, as: UInt64.self)
        count += 8
    }

    /// A field's tag: its number and wire type.
    @inline(__always)
    package mutating func tag(_ field: Int, _ wireType: UInt64) { rawVarint(UInt64(field) << 3 | wireType) }

    /// A varint field.
    package mutating func varint(_ field: Int, _ value: UInt64) {
        tag(field, 0)
        rawVarint(value)
    }

    /// A fixed64 field (a time).
    package mutating func fixed64(_ field: Int, _ value: UInt64) {
        tag(field, 1)
        UnsafeMutableRawPointer(base + count).storeBytes(of: value.littleEndian, as: UInt64.self)
        count += 8
    }

    /// A length-delimited string field.
    package mutating func string(_ field: Int, _ value: String) {
        Self.withBytes(value) { text in
            tag(field, 2)
            rawVarint(UInt64(text.count))
            raw(text)
        }
    }

    /// A string field of `first`, a space and `second` (a span's name of two parts).
    package mutating func string(_ field: Int, _ first: String, _ second: String) {
        Self.withBytes(first) { first in
            Self.withBytes(second) { second in
                tag(field, 2)
                rawVarint(UInt64(first.count + 1 + second.count))
                raw(first)
                byte(UInt8(ascii: " "))
                raw(second)
            }
        }
    }

    /// A length-delimited message written by `body`, its length patched in after it as a
    /// 5-byte varint (up to 2^35 bytes; a batch is far smaller).
    package mutating func nested(_ field: Int, _ body: (inout SpanWriter) -> Void) {
        tag(field, 2)
        let at = count
        count += 5
        body(&self)
        var length = count - at - 5
        for index in 0..<5 {
            base[at + index] = UInt8(truncatingIfNeeded: length & 0x7F) | (index < 4 ? 0x80 : 0)
            length >>= 7
        }
    }
}
