import Testing
import VeneerCore
@testable import VeneerOrigins

/// What a caller gets for each way a plain-HTTP exchange fails.
@Suite("Upstream failures as errors")
struct UpstreamFailureTests {
    let request = OutboundRequest(method: .get, endpoint: Endpoint(url: "http://upstream.test:8081")!, target: "/posts/1", timeout: .seconds(3))

    @Test("the connect timeout and the request's own deadline are upstream_timeout; everything else upstream_unavailable")
    func codes() {
        let timeouts: [UpstreamFailure] = [.connectTimedOut, .timedOut]
        let unavailable: [UpstreamFailure] = [.shuttingDown, .cancelled, .unreachable, .closedWithoutAnswer, .closedMidResponse,
                                              .failedMidResponse, .malformed("bad status line"), .tooLarge("too large")]
        for failure in timeouts { #expect(failure.error(for: request).code == .upstreamTimeout, "\(failure)") }
        for failure in unavailable { #expect(failure.error(for: request).code == .upstreamUnavailable, "\(failure)") }
    }

    @Test("messages say only what failed; the upstream's address, the timeout and the parser's words are the detail, for the log")
    func messages() {
        let unavailable: [UpstreamFailure] = [.shuttingDown, .cancelled, .unreachable, .closedWithoutAnswer, .closedMidResponse,
                                              .failedMidResponse, .malformed("bad status line"), .tooLarge("too large"), .connectTimedOut, .timedOut]
        for failure in unavailable {
            let message = failure.error(for: request).message
            #expect(!message.contains("upstream.test") && !message.contains("8081") && !message.contains("bad status") && !message.contains("too large"),
                    "\(failure): \(message)")
        }
        let timedOut = UpstreamFailure.timedOut.error(for: request)
        #expect(timedOut.message == "The upstream did not answer in time.")
        #expect(timedOut.detail == "upstream.test:8081 did not answer within 3.0 seconds")
        let malformed = UpstreamFailure.malformed("bad status line").error(for: request)
        #expect(malformed.message == "The upstream sent a malformed response.")
        #expect(malformed.detail == "upstream.test:8081 sent a malformed response: bad status line")
    }
}
