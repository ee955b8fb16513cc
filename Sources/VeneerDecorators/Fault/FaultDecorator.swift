import HTTPTypes
import NIOCore
import VeneerConfig
import VeneerCore

/// `fault`: breaks requests on purpose, so that what stands outside it (a cache's
/// `stale_if_error`, `latency_log`, the caller) can be tried against a failing upstream.
///
/// A delay holds the request before it is passed on; an abort then answers with a status
/// instead of the inner handler, or (`drop`) throws the very error the upstream origin throws
/// when the upstream closes without answering. To everything outside, either is a real
/// upstream failure. The `Veneer-Fault` request header never goes further in.
public struct FaultDecorator: Handler {
    let inner: any Handler
    let options: FaultOptions
    let random: FaultRandom
    let clock: any VeneerClock
    /// The faults injected, for the status page.
    let tally = StatusTally(["delayed", "aborted", "dropped"])

    /// Wraps `inner`; `random` holds the draws (seeded from the options by the factory).
    public init(inner: any Handler, options: FaultOptions, random: FaultRandom, clock: any VeneerClock) {
        self.inner = inner
        self.options = options
        self.random = random
        self.clock = clock
    }

    /// Delays, fails or passes the request on, as its plan says.
    public func handle(_ request: ProxyRequest) async throws -> ProxyResponse {
        var request = request
        let plan: FaultPlan
        if let header = request.headers[.veneerFault] {
            request.headers[.veneerFault] = nil
            // Only a caller on this machine may break requests: the header must not become a
            // way for a remote client to make Veneer fail for everyone else's benefit.
            if options.allowHeader, request.client?.isLoopback == true {
                plan = try FaultPlan(header: header)
            } else {
                plan = self.plan(for: request)
            }
        } else {
            plan = self.plan(for: request)
        }
        if let delay = plan.delay, delay > .zero {
            request.record.append(.init(name: "fault", detail: "delay \(Units.format(delay))", duration: delay))
            tally.add("delayed")
            try await clock.sleep(for: delay)
        }
        switch plan.abort {
        case .status(let code):
            request.record.append(.init(name: "fault", detail: "abort \(code)"))
            tally.add("aborted")
            return Self.response(code)
        case .drop:
            request.record.append(.init(name: "fault", detail: "drop"))
            tally.add("dropped")
            throw ProxyError.upstreamClosedWithoutAnswer(nil)
        case nil:
            return try await inner.handle(request)
        }
    }

    /// The configured rules' plan: each rule that matches the request applies with its
    /// percentage. The draws are made in a fixed order (delay, its length, abort), so that a
    /// seed gives the same plan for the same sequence of requests.
    public func plan(for request: ProxyRequest) -> FaultPlan {
        var plan = FaultPlan()
        if let delay = options.delay, delay.scope.matches(request), random.chance(delay.scope.percent) {
            plan.delay = random.duration(from: delay.minimum, to: delay.maximum)
        }
        if let abort = options.abort, abort.scope.matches(request), random.chance(abort.scope.percent) {
            plan.abort = abort.abort
        }
        return plan
    }

    static func response(_ code: Int) -> ProxyResponse {
        var body = ByteBuffer()
        body.writeStaticString("{\"error\":\"fault_injected\",\"message\":\"Veneer's fault decorator answered ")
        body.writeString(String(code))
        body.writeStaticString(" instead of the upstream.\"}\n")
        // Never stored: a cache outside must not serve one request's fault to the others
        // (a 404 or a 501 is cacheable by default).
        return .json(HTTPResponse.Status(code: code), body, headers: [.cacheControl: "no-store"])
    }
}
