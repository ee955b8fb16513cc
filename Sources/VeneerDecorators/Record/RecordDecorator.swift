import Foundation
import Logging
import VeneerCore

/// `record`: writes every exchange that passes through it to a HAR 1.2 file, the format
/// browser devtools, Charles and Proxyman import, so that staging can be recorded once and
/// replayed offline (the `replay` origin) or inspected.
///
/// What it writes is what it sees at its place in the chain: outermost, the callers' requests
/// and Veneer's answers (cache hits included); innermost, what goes to the origin. A failure
/// inside is recorded as the error response the caller gets. Credentials never reach the
/// file (``RequestRedaction``), and a file that cannot be written costs a log line, not the request.
public struct RecordDecorator: Handler, ReadsRequestBodies {
    let inner: any Handler
    let options: RecordOptions
    let writer: HARWriter
    let redaction: RequestRedaction
    let clock: any VeneerClock
    let logger: Logger
    /// `limits.buffered`: the copy of a streamed answer kept until its end takes its share.
    var buffers = BufferBudget.unbounded
    /// Exchanges written and those that could not be, for the status page.
    let tally = StatusTally(["recorded", "failed"])

    /// Wraps `inner`, writing to `writer`.
    public init(inner: any Handler, options: RecordOptions, writer: HARWriter, clock: any VeneerClock, logger: Logger) {
        self.inner = inner
        self.options = options
        self.writer = writer
        self.redaction = RequestRedaction(marker: .plain, extraHeaders: options.redactHeaders)
        self.clock = clock
        self.logger = logger
    }

    /// Passes the request on and records the exchange; the request's record says so when it
    /// traces (and always when the file could not be written).
    public func handle(_ request: ProxyRequest) async throws -> ProxyResponse {
        let started = clock.now()
        let start = clock.monotonic()
        let place = request.record.traces ? request.record.place("record") : nil
        do {
            let response = try await inner.handle(request)
            if let stream = response.stream {
                recordWhilePassing(stream, request, response, started: started, start: start, at: place)
            } else {
                record(request, response, started: started, elapsed: clock.monotonic() - start, at: place)
            }
            return response
        } catch {
            let answered = (error as? ProxyError ?? .internal).response
            record(request, answered, started: started, elapsed: clock.monotonic() - start, at: place)
            throw error
        }
    }

    /// A streamed answer is recorded once its body has passed: a copy of up to `max_body` is
    /// kept on the way; a longer body is noted as left out (as a buffered one over `max_body`
    /// is), and a body that was cut is noted as such.
    func recordWhilePassing(_ stream: BodyStream, _ request: ProxyRequest, _ response: ProxyResponse, started: Date, start: Duration,
                            at place: RequestRecord.Place?) {
        let copy = BodyStream.Copy(limit: options.maxBody, budget: buffers)
        let total = BodyStream.Copy.Counter()
        let decorator = self
        stream.tap { event in
            switch event {
            case .part(let part):
                total.bytes += part.readableBytes
                copy.append(part)
            case .end, .failed:
                var whole = response
                whole.stream = nil
                var leftOut: String?
                if case .failed = event {
                    _ = copy.take()
                    leftOut = "body cut after \(total.bytes) bytes (the client left or the upstream failed), left out"
                } else if let body = copy.take() {
                    whole.body = body
                } else if copy.droppedOverBudget {
                    leftOut = "body of \(total.bytes) bytes left out (no room in limits.buffered)"
                } else {
                    leftOut = "body of \(total.bytes) bytes left out (over max_body)"
                }
                decorator.record(request, whole, started: started, elapsed: decorator.clock.monotonic() - start, at: place,
                                 leftOut: leftOut.map { ($0, total.bytes) })
            }
        }
    }

    func record(_ request: ProxyRequest, _ response: ProxyResponse, started: Date, elapsed: Duration, at place: RequestRecord.Place?,
                leftOut: (comment: String, size: Int)? = nil) {
        let entry = HAREntry.make(request: request, response: response, started: started, elapsed: elapsed,
                                  maxBody: options.maxBody, redaction: redaction, leftOut: leftOut)
        do {
            try writer.append(entry.buffer)
            tally.add("recorded")
            if place != nil { request.record.append(.init(name: "record", detail: "recorded"), at: place) }
        } catch {
            tally.add("failed")
            logger.error("record: \(error)", metadata: ["request_id": .string(request.requestID)])
            request.record.append(.init(name: "record", detail: "not recorded"), at: place)
        }
    }
}
