import VeneerCore

/// The protobuf encoding of an OTLP `ExportTraceServiceRequest`
/// (opentelemetry-proto `collector/trace/v1/trace_service.proto` and `trace/v1/trace.proto`),
/// written by hand: Veneer sends one message kind and reads no answer, which needs a few
/// dozen lines of the wire format rather than the protobuf runtime and generated code (which
/// would add minutes to every clean build: README, Telemetry).
///
/// One `ResourceSpans` (`service.name`, `service.version`), one `ScopeSpans` (`veneer`),
/// the spans in order. Field numbers are the .proto's.
enum OTLPTraceEncoder {
    /// The request body for `spans`, from `service` (its `service.name`).
    static func encode(_ spans: some Collection<SpanNote>, service: String) -> [UInt8] {
        var resource = Writer()
        resource.message(1, attribute("service.name", .string(service)))                   // Resource.attributes
        resource.message(1, attribute("service.version", .string(VeneerVersion.text)))
        var scope = Writer()
        scope.string(1, "veneer")                                                            // InstrumentationScope.name
        scope.string(2, VeneerVersion.text)                                                  // .version
        var scopeSpans = Writer()
        scopeSpans.message(1, scope.bytes)                                                   // ScopeSpans.scope
        for span in spans { scopeSpans.message(2, encode(span)) }                            // ScopeSpans.spans
        var resourceSpans = Writer()
        resourceSpans.message(1, resource.bytes)                                             // ResourceSpans.resource
        resourceSpans.message(2, scopeSpans.bytes)                                           // ResourceSpans.scope_spans
        var request = Writer()
        request.message(1, resourceSpans.bytes)                                              // ExportTraceServiceRequest.resource_spans
        return request.bytes
    }

    /// One `Span`.
    static func encode(_ span: SpanNote) -> [UInt8] {
        var writer = Writer()
        writer.bytes(1, bigEndian(span.traceID.high) + bigEndian(span.traceID.low))         // trace_id
        writer.bytes(2, bigEndian(span.spanID))                                              // span_id
        if let state = span.traceState { writer.string(3, state) }                           // trace_state
        if let parent = span.parentSpanID { writer.bytes(4, bigEndian(parent)) }             // parent_span_id
        writer.string(5, span.name)                                                          // name
        writer.varint(6, UInt64(span.kind.rawValue))                                         // kind
        writer.fixed64(7, UInt64(max(0, span.start)))                                        // start_time_unix_nano
        writer.fixed64(8, UInt64(max(0, span.end)))                                          // end_time_unix_nano
        for (key, value) in span.attributes { writer.message(9, attribute(key, value)) }     // attributes
        if let error = span.error {
            var status = Writer()
            status.string(2, error)                                                          // Status.message
            status.varint(3, 2)                                                              // Status.code: STATUS_CODE_ERROR
            writer.message(15, status.bytes)                                                 // status
        }
        return writer.bytes
    }

    /// A `KeyValue` with its `AnyValue`.
    static func attribute(_ key: String, _ value: SpanNote.Value) -> [UInt8] {
        var any = Writer()
        switch value {
        case .string(let text): any.string(1, text)                                          // string_value
        case .bool(let flag): any.varint(2, flag ? 1 : 0)                                    // bool_value
        case .int(let number): any.varint(3, UInt64(bitPattern: number))                     // int_value
        }
        var pair = Writer()
        pair.string(1, key)
        pair.message(2, any.bytes)
        return pair.bytes
    }

    static func bigEndian(_ value: UInt64) -> [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * $0)) }
    }

    /// Protobuf's wire format: a tag (field number and wire type), then the value.
    struct Writer {
        var bytes: [UInt8] = []

        mutating func rawVarint(_ value: UInt64) {
            var value = value
            while value >= 0x80 {
                bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
                value >>= 7
            }
            bytes.append(UInt8(value))
        }

        mutating func tag(_ field: Int, _ wireType: UInt64) { rawVarint(UInt64(field) << 3 | wireType) }

        mutating func varint(_ field: Int, _ value: UInt64) {
            tag(field, 0)
            rawVarint(value)
        }

        mutating func fixed64(_ field: Int, _ value: UInt64) {
            tag(field, 1)
            for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
        }

        mutating func bytes(_ field: Int, _ value: [UInt8]) {
            tag(field, 2)
            rawVarint(UInt64(value.count))
            bytes.append(contentsOf: value)
        }

        mutating func string(_ field: Int, _ value: String) { bytes(field, Array(value.utf8)) }

        mutating func message(_ field: Int, _ value: [UInt8]) { bytes(field, value) }
    }
}
