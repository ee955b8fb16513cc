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

    @Test("messages name the upstream (never the path or a header) and the timeout")
    func messages() {
        #expect(UpstreamFailure.timedOut.error(for: request).message == "The upstream upstream.test:8081 did not answer within 3.0 seconds.")
        #expect(UpstreamFailure.malformed("bad status line").error(for: request).message
            == "The upstream upstream.test:8081 sent a malformed response: bad status line")
        #expect(UpstreamFailure.tooLarge("The upstream response is larger than 10 bytes.").error(for: request).message
            == "The upstream response is larger than 10 bytes.")
    }
}
