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
public struct RecordDecorator: Handler {
    let inner: any Handler
    let options: RecordOptions
    let writer: HARWriter
    let redaction: RequestRedaction
    let clock: any VeneerClock
    let logger: Logger
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
            record(request, response, started: started, elapsed: clock.monotonic() - start, at: place)
            return response
        } catch {
            let answered = (error as? ProxyError ?? .internal).response
            record(request, answered, started: started, elapsed: clock.monotonic() - start, at: place)
            throw error
        }
    }

    func record(_ request: ProxyRequest, _ response: ProxyResponse, started: Date, elapsed: Duration, at place: RequestRecord.Place?) {
        let entry = HAREntry.make(request: request, response: response, started: started, elapsed: elapsed,
                                  maxBody: options.maxBody, redaction: redaction)
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
