import Synchronization

/// A W3C Trace Context (https://www.w3.org/TR/trace-context/) as one request carries it
/// through Veneer: the trace it belongs to, the span Veneer answers it in (the server span),
/// the caller's span if it named one, whether the trace is sampled, and the caller's
/// `tracestate`, passed on untouched.
///
/// Pure values: parsing and formatting need no socket and no clock. Ids come from a
/// ``TraceIDGenerator``; only a request whose environment has `telemetry` gets one.
public struct TraceContext: Sendable, Equatable {
    /// The trace's 16 bytes, as two big-endian halves (`high` first on the wire).
    public struct TraceID: Sendable, Hashable {
        /// The first 8 bytes.
        public let high: UInt64
        /// The last 8 bytes.
        public let low: UInt64

        /// An id from its halves.
        public init(high: UInt64, low: UInt64) {
            self.high = high
            self.low = low
        }

        /// Its 32 lowercase hexadecimal digits.
        public var hex: String { TraceContext.hex(high) + TraceContext.hex(low) }
    }

    /// The trace.
    public let traceID: TraceID
    /// Veneer's own span for the request (the server span): the parent of its child spans.
    public let spanID: UInt64
    /// The caller's span, when the request came with a valid `traceparent`.
    public let parentSpanID: UInt64?
    /// Whether the trace is recorded (the `sampled` flag Veneer passes on).
    public let sampled: Bool
    /// The caller's `tracestate`, passed on as it came (only with a valid `traceparent`).
    public let traceState: String?

    /// A context; a `traceState` that ``acceptableTraceState(_:)`` refuses (a line break, a
    /// byte outside printable ASCII, too long) is left out: transports write it into a head
    /// as it is.
    public init(traceID: TraceID, spanID: UInt64, parentSpanID: UInt64?, sampled: Bool, traceState: String?) {
        self.init(traceID: traceID, spanID: spanID, parentSpanID: parentSpanID, sampled: sampled,
                  acceptableTraceState: Self.acceptableTraceState(traceState))
    }

    private init(traceID: TraceID, spanID: UInt64, parentSpanID: UInt64?, sampled: Bool, acceptableTraceState traceState: String?) {
        self.traceID = traceID
        self.spanID = spanID
        self.parentSpanID = parentSpanID
        self.sampled = sampled
        self.traceState = traceState
    }

    /// What a valid `traceparent` says.
    public struct Parent: Sendable, Equatable {
        /// The caller's trace.
        public let traceID: TraceID
        /// The caller's span.
        public let spanID: UInt64
        /// The caller's trace flags (bit 0: sampled).
        public let flags: UInt8

        /// Whether the caller sampled the trace.
        public var sampled: Bool { flags & 1 == 1 }
    }

    /// The longest `tracestate` passed on (the specification's 32 members of at most 256
    /// characters are more than any caller sends; a longer one is dropped, as it allows).
    public static let maxTraceState = 512

    /// Parses a `traceparent` field value the way the specification's section 4.3 asks of a
    /// vendor: version `00` exactly 55 characters; a later version at least 55, its first 55
    /// read as version 00 and the rest after a `-` ignored; version `ff`, uppercase digits, an
    /// all-zero trace or span id, or any other deviation makes it invalid (nil: ignored, never
    /// an error).
    public static func parseParent(_ value: some StringProtocol) -> Parent? {
        // On the string's own bytes (an array of them was an allocation per traced request).
        if let parsed = value.utf8.withContiguousStorageIfAvailable({ parseParent(bytes: $0) }) { return parsed }
        return Array(value.utf8).withUnsafeBufferPointer { parseParent(bytes: $0) }
    }

    private static func parseParent(bytes: UnsafeBufferPointer<UInt8>) -> Parent? {
        guard bytes.count >= 55 else { return nil }
        guard let version = hexByte(bytes, 0), version != 0xFF else { return nil }
        if version == 0 {
            guard bytes.count == 55 else { return nil }
        } else if bytes.count > 55, bytes[55] != UInt8(ascii: "-") {
            return nil
        }
        guard bytes[2] == UInt8(ascii: "-"), bytes[35] == UInt8(ascii: "-"), bytes[52] == UInt8(ascii: "-"),
              let high = hex64(bytes, 3), let low = hex64(bytes, 19), let span = hex64(bytes, 36), let flags = hexByte(bytes, 53),
              high != 0 || low != 0, span != 0
        else { return nil }
        return Parent(traceID: TraceID(high: high, low: low), spanID: span, flags: flags)
    }

    /// A `tracestate` worth passing on: at most ``maxTraceState`` printable ASCII characters
    /// (the list syntax is the next vendor's to read); nil otherwise.
    public static func acceptableTraceState(_ value: String?) -> String? {
        guard let value, !value.isEmpty, value.utf8.count <= maxTraceState,
              value.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return nil }
        return value
    }

    /// The context of a request that came with `traceparent` and `tracestate` (either nil):
    /// the caller's trace continued when its `traceparent` is valid, its sampled flag followed
    /// when `sampler` is parent-based; otherwise a new trace, sampled as `sampler` says.
    public static func start(traceparent: String?, tracestate: String?, sampler: TraceSampler,
                             ids: inout some RandomNumberGenerator) -> TraceContext {
        let spanID = newSpanID(&ids)
        if let traceparent, let parent = parseParent(traceparent) {
            return TraceContext(traceID: parent.traceID, spanID: spanID, parentSpanID: parent.spanID,
                                sampled: sampler.samples(parent.traceID, parentSampled: parent.sampled),
                                acceptableTraceState: acceptableTraceState(tracestate))
        }
        let traceID = TraceID(high: ids.next(), low: nonZero(&ids))
        return TraceContext(traceID: traceID, spanID: spanID, parentSpanID: nil, sampled: sampler.samples(traceID, parentSampled: nil),
                            acceptableTraceState: nil)
    }

    /// A new span id (never zero).
    public static func newSpanID(_ ids: inout some RandomNumberGenerator) -> UInt64 { nonZero(&ids) }

    private static func nonZero(_ ids: inout some RandomNumberGenerator) -> UInt64 {
        var value: UInt64 = 0
        while value == 0 { value = ids.next() }
        return value
    }

    /// The `traceparent` Veneer sends for a request it makes in this trace as span `spanID`
    /// (an upstream attempt, a token endpoint call): version 00, this trace, that span, the
    /// sampled flag. One string, written in place.
    public func traceparent(spanID: UInt64) -> String {
        String(unsafeUninitializedCapacity: 55) { bytes in
            writeTraceparent(spanID: spanID, into: bytes)
            return 55
        }
    }

    /// ``traceparent(spanID:)``'s 55 bytes written at the cursor (a request head written in
    /// place: no string is made).
    package func writeTraceparent(spanID: UInt64, into out: inout ByteCursor) {
        out.append(upTo: 55) { room in
            writeTraceparent(spanID: spanID, into: room.bindMemory(to: UInt8.self))
            return 55
        }
    }

    private func writeTraceparent(spanID: UInt64, into bytes: UnsafeMutableBufferPointer<UInt8>) {
        bytes[0] = UInt8(ascii: "0")
        bytes[1] = UInt8(ascii: "0")
        bytes[2] = UInt8(ascii: "-")
        Self.writeHex(traceID.high, into: bytes, at: 3)
        Self.writeHex(traceID.low, into: bytes, at: 19)
        bytes[35] = UInt8(ascii: "-")
        Self.writeHex(spanID, into: bytes, at: 36)
        bytes[52] = UInt8(ascii: "-")
        bytes[53] = UInt8(ascii: "0")
        bytes[54] = sampled ? UInt8(ascii: "1") : UInt8(ascii: "0")
    }

    /// `value` as 16 lowercase hexadecimal digits.
    public static func hex(_ value: UInt64) -> String {
        String(unsafeUninitializedCapacity: 16) { bytes in
            writeHex(value, into: bytes, at: 0)
            return 16
        }
    }

    private static func writeHex(_ value: UInt64, into bytes: UnsafeMutableBufferPointer<UInt8>, at start: Int) {
        for index in 0..<16 {
            let nibble = UInt8(truncatingIfNeeded: value >> UInt64(60 - 4 * index)) & 0xF
            bytes[start + index] = nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
        }
    }

    private static func nibble(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        default: return nil
        }
    }

    private static func hexByte(_ bytes: UnsafeBufferPointer<UInt8>, _ at: Int) -> UInt8? {
        guard let high = nibble(bytes[at]), let low = nibble(bytes[at + 1]) else { return nil }
        return high << 4 | low
    }

    private static func hex64(_ bytes: UnsafeBufferPointer<UInt8>, _ at: Int) -> UInt64? {
        var value: UInt64 = 0
        for index in at..<(at + 16) {
            guard let digit = nibble(bytes[index]) else { return nil }
            value = value << 4 | UInt64(digit)
        }
        return value
    }
}

/// The trace fields of a request Veneer makes in a request's trace (an upstream attempt):
/// its `traceparent`, naming span ``spanID``, and the caller's `tracestate` when its trace was
/// continued. The transport writes them into the request's head in place of any the caller
/// sent (``OutboundRequest/trace``): the caller's fields are passed on as they are, not copied
/// to replace two of them (a copy was 8% of an unsampled pass-through request; callgrind).
public struct OutgoingTrace: Sendable {
    /// The request's trace.
    public let context: TraceContext
    /// The span the request is (the `traceparent`'s parent id).
    public let spanID: UInt64
    /// The record whose client span this is, when its trace is sampled: told of a resend
    /// (``resent()``), so that each attempt is a span of its own.
    let record: RequestRecord?

    /// The fields of span `spanID` in `context`.
    public init(context: TraceContext, spanID: UInt64) {
        self.init(context: context, spanID: spanID, record: nil)
    }

    init(context: TraceContext, spanID: UInt64, record: RequestRecord?) {
        self.context = context
        self.spanID = spanID
        self.record = record
    }

    /// The fields for the request sent again (a transport's resend on another connection,
    /// after the first closed before an answer): another attempt, so another span, with a
    /// new id; a sampled trace's record ends the attempt before it (``RequestRecord/endOutgoing(_:name:attributes:error:)``).
    package func resent() -> OutgoingTrace {
        var ids = TraceIDGenerator()
        let next = TraceContext.newSpanID(&ids)
        record?.noteResend(from: spanID, to: next)
        return OutgoingTrace(context: context, spanID: next, record: record)
    }

    /// The `traceparent` value (``TraceContext/traceparent(spanID:)``).
    public var traceparent: String { context.traceparent(spanID: spanID) }
    /// The `tracestate` value passed on, if any.
    public var tracestate: String? { context.traceState }

    /// Whether the caller's field `name` (a canonical, lowercase name) is one these replace.
    @inline(__always)
    public static func replaces(_ name: String) -> Bool { name == "traceparent" || name == "tracestate" }

    /// How many bytes ``writeFields(into:)`` writes.
    package var fieldsLength: Int {
        "traceparent: \r\n".utf8.count + 55 + (context.traceState.map { "tracestate: \r\n".utf8.count + $0.utf8.count } ?? 0)
    }

    /// `traceparent: ...` CRLF, then `tracestate: ...` CRLF when there is one: ``fieldsLength`` bytes.
    package func writeFields(into out: inout ByteCursor) {
        out.append("traceparent: ")
        context.writeTraceparent(spanID: spanID, into: &out)
        out.append("\r\n")
        if let state = context.traceState {
            out.append("tracestate: ")
            out.append(state)
            out.append("\r\n")
        }
    }
}

/// Trace and span ids without a system call: a per-process random seed and a counter through
/// the splitmix64 mixer (as ``RequestID``), uniform in every bit, so the ratio sampler reads
/// them as it reads random ids. The specification asks ids to be unique and random-looking,
/// not secret; a getrandom(2) per id cost more than the rest of an unsampled request's telemetry.
public struct TraceIDGenerator: RandomNumberGenerator {
    private static let counter = Atomic<UInt64>(UInt64.random(in: .min ... .max))

    /// A generator (they share one sequence).
    public init() {}

    /// The next id.
    public mutating func next() -> UInt64 {
        var value = Self.counter.wrappingAdd(0x9E37_79B9_7F4A_7C15, ordering: .relaxed).newValue
        value = (value ^ (value >> 30)) &* 0xBF58_476D_1CE4_E5B9
        value = (value ^ (value >> 27)) &* 0x94D0_49BB_1331_11EB
        return value ^ (value >> 31)
    }
}

/// Which traces are recorded: OpenTelemetry's `traceidratio` sampler (a trace id whose last
/// 8 bytes fall below `ratio` of their range), parent-based or not (`parentbased_*`: a
/// caller's sampled flag decides for its trace).
public struct TraceSampler: Sendable, Hashable {
    /// The share of new traces recorded, 0...1.
    public let ratio: Double
    /// Whether a caller's sampled flag decides (OpenTelemetry's default, `parentbased_*`).
    public let parentBased: Bool

    /// A sampler.
    public init(ratio: Double, parentBased: Bool = true) {
        self.ratio = min(max(ratio, 0), 1)
        self.parentBased = parentBased
    }

    /// Whether trace `traceID` is recorded; `parentSampled` is the caller's flag, if it sent one.
    public func samples(_ traceID: TraceContext.TraceID, parentSampled: Bool?) -> Bool {
        if parentBased, let parentSampled { return parentSampled }
        if ratio >= 1 { return true }
        if ratio <= 0 { return false }
        // The low 63 bits against the ratio of their range (the trace id is random there).
        return Double(traceID.low & (UInt64.max >> 1)) < ratio * Double(UInt64.max >> 1)
    }
}
