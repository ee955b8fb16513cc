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
/// which the protobuf wire format allows), so no message is built apart and copied.
enum OTLPTraceEncoder {
    /// The request body for `spans`, from `service` (its `service.name`).
    static func encode(_ spans: some Collection<SpanNote>, service: String) -> [UInt8] {
        var writer = Writer()
        writer.bytes.reserveCapacity(256 + spans.count * 400)
        writer.nested(1) { request in                                                        // ExportTraceServiceRequest.resource_spans
            request.nested(1) { resource in                                                  // ResourceSpans.resource
                resource.attribute(1, "service.name", .string(service))                      // Resource.attributes
                resource.attribute(1, "service.version", .string(VeneerVersion.text))
            }
            request.nested(2) { scopeSpans in                                                // ResourceSpans.scope_spans
                scopeSpans.nested(1) { scope in                                              // ScopeSpans.scope
                    scope.string(1, "veneer")                                                // InstrumentationScope.name
                    scope.string(2, VeneerVersion.text)                                      // .version
                }
                for span in spans { scopeSpans.nested(2) { $0.span(span) } }                 // ScopeSpans.spans
            }
        }
        return writer.bytes
    }

    /// Protobuf's wire format: a tag (field number and wire type), then the value.
    struct Writer {
        var bytes: [UInt8] = []
        /// A nested message's length before it is known: five bytes of a padded varint.
        private static let placeholder: [UInt8] = [0x80, 0x80, 0x80, 0x80, 0x00]

        /// One `Span`.
        mutating func span(_ span: SpanNote) {
            tag(1, 2)                                                                        // trace_id
            rawVarint(16)
            bigEndian(span.traceID.high)
            bigEndian(span.traceID.low)
            tag(2, 2)                                                                        // span_id
            rawVarint(8)
            bigEndian(span.spanID)
            if let state = span.traceState { string(3, state) }                              // trace_state
            if let parent = span.parentSpanID {                                              // parent_span_id
                tag(4, 2)
                rawVarint(8)
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

        mutating func rawVarint(_ value: UInt64) {
            var value = value
            while value >= 0x80 {
                bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
                value >>= 7
            }
            bytes.append(UInt8(value))
        }

        // Eight bytes in one append (byte by byte, each append checked the array's uniqueness and capacity).
        mutating func bigEndian(_ value: UInt64) {
            withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
        }

        mutating func tag(_ field: Int, _ wireType: UInt64) { rawVarint(UInt64(field) << 3 | wireType) }

        mutating func varint(_ field: Int, _ value: UInt64) {
            tag(field, 0)
            rawVarint(value)
        }

        mutating func fixed64(_ field: Int, _ value: UInt64) {
            tag(field, 1)
            withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
        }

        mutating func string(_ field: Int, _ value: String) {
            tag(field, 2)
            rawVarint(UInt64(value.utf8.count))
            bytes.append(contentsOf: value.utf8)
        }

        /// A length-delimited message written by `body`, its length patched in after it as a
        /// 5-byte varint (up to 2^35 bytes; a batch is far smaller).
        mutating func nested(_ field: Int, _ body: (inout Writer) -> Void) {
            tag(field, 2)
            let at = bytes.count
            // A constant: an array literal here was an allocation per message, several per
            // attribute, most of what encoding a span cost (perf).
            bytes.append(contentsOf: Self.placeholder)
            body(&self)
            var length = bytes.count - at - 5
            for index in 0..<5 {
                bytes[at + index] = UInt8(truncatingIfNeeded: length & 0x7F) | (index < 4 ? 0x80 : 0)
                length >>= 7
            }
        }
    }
}
