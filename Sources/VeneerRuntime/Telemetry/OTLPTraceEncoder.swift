import NIOCore
import VeneerCore

/// The protobuf encoding of an OTLP `ExportTraceServiceRequest`
/// (opentelemetry-proto `collector/trace/v1/trace_service.proto` and `trace/v1/trace.proto`),
/// written by hand: Veneer sends one message kind and reads no answer, which needs a few
/// dozen lines of the wire format rather than the protobuf runtime and generated code
/// (README, Traces).
///
/// One `ResourceSpans` (`service.name`, `service.version`), one `ScopeSpans` (`veneer`),
/// the spans in order (each written by ``SpanWriter``, VeneerCore's). Field numbers are the
/// .proto's. Everything is written into one buffer: a nested message's length is a 5-byte
/// varint written after it (a padded varint, which the protobuf wire format allows), so no
/// message is built apart and copied; the exporter appends each request's spans to its batch
/// as they come (``append(bound:to:_:)``) and writes the head around them when it sends the
/// batch (``Envelope``).
enum OTLPTraceEncoder {
    /// The request body for `spans`, from `service` (its `service.name`): the envelope's
    /// ``Batch`` with the spans appended, closed.
    static func encode(_ spans: some Collection<SpanNote>, service: String) -> ByteBuffer {
        let envelope = Envelope(service: service)
        var bound = 0
        for span in spans { bound += SpanWriter.bound(of: span) }
        var none: ByteBuffer?
        var batch = envelope.batch(reusing: &none, capacity: bound)
        append(spans, bound: bound, to: &batch)
        envelope.close(&batch)
        return batch
    }

    /// Appends each of `spans` as a `ScopeSpans.spans` field (its tag, a padded length, the
    /// `Span`) to `batch`, `bound` their ``SpanWriter/bound(of:)`` summed: written in one pass by unchecked
    /// stores into room made beforehand (appending to an array checked its uniqueness and
    /// capacity for every byte and string, most of what encoding cost; perf).
    static func append(_ spans: some Collection<SpanNote>, bound: Int, to batch: inout ByteBuffer) {
        append(bound: bound, to: &batch) { writer in
            for span in spans { writer.span(span) }
        }
    }

    /// Appends what `write` writes, `ScopeSpans.spans` fields of at most `bound` bytes in all,
    /// to `batch` (a request's spans written straight from its record: ``SpanSink``).
    static func append(bound: Int, to batch: inout ByteBuffer, _ write: (inout SpanWriter) -> Void) {
        batch.writeWithUnsafeMutableBytes(minimumWritableBytes: bound) { buffer in
            var writer = SpanWriter(base: buffer.baseAddress!.assumingMemoryBound(to: UInt8.self))
            write(&writer)
            // The bound is exact arithmetic over what each span writes (tested against
            // encodings of every field at its largest); a wrong one stops here.
            precondition(writer.count <= bound, "OTLP encoding exceeded its bound")
            return writer.count
        }
    }

    /// What surrounds the spans of every request to the collector: an
    /// `ExportTraceServiceRequest` of one `ResourceSpans` (`service.name`, `service.version`)
    /// of one `ScopeSpans` (`veneer`), written once. A batch is a buffer with room for this
    /// head at its front; the spans are appended as requests give them (``append(bound:to:_:)``),
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

        private static func written(bound: Int, _ body: (inout SpanWriter) -> Void) -> [UInt8] {
            [UInt8](unsafeUninitializedCapacity: bound) { buffer, count in
                var writer = SpanWriter(base: buffer.baseAddress!)
                body(&writer)
                precondition(writer.count <= bound, "OTLP envelope exceeded its bound")
                count = writer.count
            }
        }
    }
}
