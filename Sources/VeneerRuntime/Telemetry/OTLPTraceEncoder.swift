import NIOCore
import VeneerCore

/// The protobuf encoding of an OTLP `ExportTraceServiceRequest`
/// (opentelemetry-proto `collector/trace/v1/trace_service.proto` and `trace/v1/trace.proto`),
/// written by hand: Veneer sends one message kind and reads no answer, which needs a few
/// dozen lines of the wire format rather than the protobuf runtime and generated code
/// (README, Traces).
///
/// One `ResourceSpans` (`service.name`, `service.version`), one `ScopeSpans` (`veneer`),
/// the spans in order. Field numbers are the .proto's. Everything is written into one
/// buffer: a nested message's length is a 5-byte varint written after it (a padded varint,
/// which the protobuf wire format allows), so no message is built apart and copied; the
/// exporter appends each request's spans to its batch as they come (``append(_:bound:to:)``)
/// and writes the head around them when it sends the batch (``Envelope``).
enum OTLPTraceEncoder {
    /// The request body for `spans`, from `service` (its `service.name`): the envelope's
    /// ``Batch`` with the spans appended, closed.
    static func encode(_ spans: some Collection<SpanNote>, service: String) -> ByteBuffer {
        let envelope = Envelope(service: service)
        var bound = 0
        for span in spans { bound += self.bound(of: span) }
        var none: ByteBuffer?
        var batch = envelope.batch(reusing: &none, capacity: bound)
        append(spans, bound: bound, to: &batch)
        envelope.close(&batch)
        return batch
    }

    /// Appends each of `spans` as a `ScopeSpans.spans` field (its tag, a padded length, the
    /// `Span`) to `batch`, `bound` their ``bound(of:)`` summed: written in one pass by unchecked
    /// stores into room made beforehand (appending to an array checked its uniqueness and
    /// capacity for every byte and string, most of what encoding cost; perf).
    static func append(_ spans: some Collection<SpanNote>, bound: Int, to batch: inout ByteBuffer) {
        batch.writeWithUnsafeMutableBytes(minimumWritableBytes: bound) { buffer in
            var writer = Writer(base: buffer.baseAddress!.assumingMemoryBound(to: UInt8.self))
            for span in spans { writer.nested(2) { $0.span(span) } }                            // ScopeSpans.spans
            // The bound is exact arithmetic over what each span writes (tested against
            // encodings of every field at its largest); a wrong one stops here.
            precondition(writer.count <= bound, "OTLP encoding exceeded its bound")
            return writer.count
        }
    }

    /// What surrounds the spans of every request to the collector: an
    /// `ExportTraceServiceRequest` of one `ResourceSpans` (`service.name`, `service.version`)
    /// of one `ScopeSpans` (`veneer`), written once. A batch is a buffer with room for this
    /// head at its front; the spans are appended as requests give them (``append(_:bound:to:)``),
    /// and ``close(_:)`` writes the head with the two lengths, so nothing is copied.
    struct Envelope: Sendable {
        /// `ResourceSpans.resource`, with its tag and length.
        private let resource: [UInt8]
        /// `ScopeSpans.scope`, with its tag and length.
        private let scope: [UInt8]

        /// The envelope of spans from `service`.
        init(service: String) {
            resource = Self.written(bound: 96 + service.utf8.count + VeneerVersion.text.utf8.count) { writer in
                writer.nested(1) { resource in                                               // ResourceSpans.resource
                    resource.attribute(1, "service.name", .string(service))                  // Resource.attributes
                    resource.attribute(1, "service.version", .string(VeneerVersion.text))
                }
            }
            scope = Self.written(bound: 32 + VeneerVersion.text.utf8.count) { writer in
                writer.nested(1) { scope in                                                  // ScopeSpans.scope
                    scope.string(1, "veneer")                                                // InstrumentationScope.name
                    scope.string(2, VeneerVersion.text)                                      // .version
                }
            }
        }

        /// The head's bytes: two tags and two padded lengths around the resource and the scope.
        var headSize: Int { 12 + resource.count + scope.count }

        /// An empty batch with room for `capacity` bytes of spans (it grows beyond if it must),
        /// in `spare`'s memory when one is given (a batch sent: its memory is used again).
        func batch(reusing spare: inout ByteBuffer?, capacity: Int) -> ByteBuffer {
            var buffer: ByteBuffer
            if spare != nil {
                // Cleared where it is held alone: its memory is kept, not copied.
                spare!.clear(minimumCapacity: headSize + capacity)
                buffer = spare!
                spare = nil
            } else {
                buffer = ByteBufferAllocator().buffer(capacity: headSize + capacity)
            }
            buffer.moveWriterIndex(forwardBy: headSize)
            return buffer
        }

        /// Makes `batch`, made by ``batch(reusing:capacity:)`` with spans appended since, the
        /// request body: its head written in place (a batch held twice here was copied whole).
        func close(_ batch: inout ByteBuffer) {
            let spans = batch.writerIndex - headSize
            let scopeSpans = scope.count + spans
            let resourceSpans = resource.count + 6 + scopeSpans
            var at = batch.readerIndex
            func head(_ tag: UInt8, _ length: Int) {
                var length = length
                at += batch.setInteger(tag, at: at)
                for index in 0..<5 {
                    at += batch.setInteger(UInt8(truncatingIfNeeded: length & 0x7F) | (index < 4 ? 0x80 : 0), at: at)
                    length >>= 7
                }
            }
            head(1 << 3 | 2, resourceSpans)                                                  // ExportTraceServiceRequest.resource_spans
            at += batch.setBytes(resource, at: at)
            head(2 << 3 | 2, scopeSpans)                                                     // ResourceSpans.scope_spans
            at += batch.setBytes(scope, at: at)
        }

        private static func written(bound: Int, _ body: (inout Writer) -> Void) -> [UInt8] {
            [UInt8](unsafeUninitializedCapacity: bound) { buffer, count in
                var writer = Writer(base: buffer.baseAddress!)
                body(&writer)
                precondition(writer.count <= bound, "OTLP envelope exceeded its bound")
                count = writer.count
            }
        }
    }

    /// At most how many bytes ``Writer/span(_:)`` writes for `span`, with its field's tag and
    /// length: fixed fields 64 bytes (ids 2 + 16, 2 + 8, 2 + 8; kind 2; times 2 × 9; the
    /// nested length 6), a string field 6 bytes more than its text, an attribute 29 more than
    /// its key and text, the status 14 more than its message.
    static func bound(of span: SpanNote) -> Int {
        var total = 64 + 6 + span.name.utf8.count
        if let state = span.traceState { total += 6 + state.utf8.count }
        for (key, value) in span.attributes {
            total += 29 + key.utf8.count
            if case .string(let text) = value { total += text.utf8.count }
        }
        if let error = span.error { total += 14 + error.utf8.count }
        return total
    }

    /// Protobuf's wire format: a tag (field number and wire type), then the value; written
    /// from `base` on, into memory the caller made large enough (``bound(of:)``).
    struct Writer {
        let base: UnsafeMutablePointer<UInt8>
        /// How many bytes are written.
        var count = 0

        init(base: UnsafeMutablePointer<UInt8>) {
            self.base = base
        }

        /// One `Span`.
        mutating func span(_ span: SpanNote) {
            tag(1, 2)                                                                        // trace_id
            byte(16)
            bigEndian(span.traceID.high)
            bigEndian(span.traceID.low)
            tag(2, 2)                                                                        // span_id
            byte(8)
            bigEndian(span.spanID)
            if let state = span.traceState { string(3, state) }                              // trace_state
            if let parent = span.parentSpanID {                                              // parent_span_id
                tag(4, 2)
                byte(8)
                bigEndian(parent)
            }
            string(5, span.name)                                                             // name
            varint(6, UInt64(span.kind.rawValue))                                            // kind
            fixed64(7, UInt64(max(0, span.start)))                                           // start_time_unix_nano
            fixed64(8, UInt64(max(0, span.end)))                                             // end_time_unix_nano
            for (key, value) in span.attributes { attribute(9, key, value) }                 // attributes
            if let error = span.error {
                nested(15) { status in                                                       // status
                    status.string(2, error)                                                  // Status.message
                    status.varint(3, 2)                                                      // Status.code: STATUS_CODE_ERROR
                }
            }
        }

        /// A `KeyValue` with its `AnyValue`, as field `field`: both lengths computed first and
        /// written exactly (the most frequent message, a span's dozen attributes: no
        /// placeholder to patch, and eight bytes fewer each).
        mutating func attribute(_ field: Int, _ key: String, _ value: SpanNote.Value) {
            let keyCount = key.utf8.count
            let anyLength: Int
            switch value {
            case .string(let text): anyLength = 1 + Self.varintSize(UInt64(text.utf8.count)) + text.utf8.count
            case .bool: anyLength = 2
            case .int(let number): anyLength = 1 + Self.varintSize(UInt64(bitPattern: number))
            }
            tag(field, 2)
            rawVarint(UInt64(1 + Self.varintSize(UInt64(keyCount)) + keyCount + 1 + Self.varintSize(UInt64(anyLength)) + anyLength))
            string(1, key)                                                                   // KeyValue.key
            tag(2, 2)                                                                        // KeyValue.value
            rawVarint(UInt64(anyLength))
            switch value {
            case .string(let text): string(1, text)                                          // string_value
            case .bool(let flag): varint(2, flag ? 1 : 0)                                    // bool_value
            case .int(let number): varint(3, UInt64(bitPattern: number))                     // int_value
            }
        }

        /// How many bytes `value` takes as a varint.
        static func varintSize(_ value: UInt64) -> Int {
            value == 0 ? 1 : (64 - value.leadingZeroBitCount + 6) / 7
        }

        @inline(__always)
        mutating func byte(_ value: UInt8) {
            base[count] = value
            count += 1
        }

        mutating func rawVarint(_ value: UInt64) {
            var value = value
            while value >= 0x80 {
                byte(UInt8(truncatingIfNeeded: value) | 0x80)
                value >>= 7
            }
            byte(UInt8(value))
        }

        mutating func bigEndian(_ value: UInt64) {
            UnsafeMutableRawPointer(base + count).storeBytes(of: value.bigEndian, as: UInt64.self)
            count += 8
        }

        @inline(__always)
        mutating func tag(_ field: Int, _ wireType: UInt64) { rawVarint(UInt64(field) << 3 | wireType) }

        mutating func varint(_ field: Int, _ value: UInt64) {
            tag(field, 0)
            rawVarint(value)
        }

        mutating func fixed64(_ field: Int, _ value: UInt64) {
            tag(field, 1)
            UnsafeMutableRawPointer(base + count).storeBytes(of: value.littleEndian, as: UInt64.self)
            count += 8
        }

        mutating func string(_ field: Int, _ value: String) {
            var value = value
            tag(field, 2)
            value.withUTF8 { text in
                rawVarint(UInt64(text.count))
                if let from = text.baseAddress { (base + count).update(from: from, count: text.count) }
                count += text.count
            }
        }

        /// A length-delimited message written by `body`, its length patched in after it as a
        /// 5-byte varint (up to 2^35 bytes; a batch is far smaller).
        mutating func nested(_ field: Int, _ body: (inout Writer) -> Void) {
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
}
