import AsyncHTTPClient
import HTTPTypes
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1
import NIOPosix
import NIOSSL
import Synchronization
import VeneerCore
import VeneerHTTP1

/// ``HTTPTransport`` over AsyncHTTPClient: one client (one connection pool) per distinct
/// set of ``TransportOptions``, on the daemon's event loops.
public final class AsyncHTTPClientTransport: HTTPTransport {
    let client: HTTPClient

    /// Creates a transport with its own client.
    public init(options: TransportOptions, eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) {
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        configuration.decompression = .disabled
        configuration.timeout = .init(connect: .init(options.connectTimeout), read: nil)
        configuration.connectionPool = .init(
            idleTimeout: .seconds(60),
            concurrentHTTP1ConnectionsPerHostSoftLimit: options.connectionsPerLoop ?? 128)
        configuration.httpVersion = .automatic
        client = HTTPClient(eventLoopGroup: eventLoopGroup, configuration: configuration)
    }

    /// Sends one request; the response is whole, or a stream (see ``stream(_:for:)``).
    public func send(_ request: OutboundRequest) async throws -> ProxyResponse {
        var outbound = HTTPClientRequest(url: request.endpoint.scheme + "://" + request.endpoint.authority + request.pathAndQuery)
        outbound.method = HTTPMethod(request.method)
        var headers = HTTPHeaders()
        headers.reserveCapacity(request.headers.count + 3)
        headers.add(name: "Host", value: request.endpoint.authority)
        let traced = request.trace != nil
        for field in request.headers where !(traced && OutgoingTrace.replaces(field.name.canonicalName)) {
            headers.add(name: field.name.rawName, value: field.value)
        }
        if let trace = request.trace {
            headers.add(name: "traceparent", value: trace.traceparent)
            if let state = trace.tracestate { headers.add(name: "tracestate", value: state) }
        }
        if let forwardedFor = request.forwardedFor { headers.add(name: "X-Forwarded-For", value: forwardedFor) }
        outbound.headers = headers
        if let body = request.body {
            outbound.body = .bytes(body)
        } else if let stream = request.bodyStream {
            // Part by part as AsyncHTTPClient writes (its backpressure reaches the client's
            // socket through the stream), with the client's length when it gave one.
            outbound.body = .stream(BodyStreamParts(stream: stream), length: stream.expectedLength.map { .known(Int64($0)) } ?? .unknown)
        }
        let response: HTTPClientResponse
        do {
            response = try await client.execute(outbound, timeout: .init(request.timeout))
        } catch let error as ProxyError {
            // The request body was cut (its client left or paused too long): its own error.
            throw error
        } catch {
            throw Self.map(error, request)
        }
        var fields = HTTPFields(response.headers, splitCookie: false)
        HopByHop.strip(&fields)
        let status = HTTPResponse.Status(code: Int(response.status.code), reasonPhrase: response.status.reasonPhrase)
        let length = response.headers.first(name: "content-length").flatMap { Int($0) }
        if let stream = Self.stream(response, length: length, for: request) {
            return ProxyResponse(status: status, headers: ProxyHeaders(fields), stream: stream)
        }
        // Read whole: its length is reserved from limits.buffered first; one with no room
        // streams instead when the request allows it (it then holds a few buffers).
        var reservation: BufferBudget.Reservation?
        if let buffers = request.buffers, request.method != .head, let length, length > 0, length <= request.maxResponseBodySize {
            reservation = buffers.reserve(length)
            if reservation == nil {
                guard request.streamThreshold != nil else { throw BodyStream.overloaded }
                return ProxyResponse(status: status, headers: ProxyHeaders(fields), stream: Self.pumped(response, length: length, for: request))
            }
        }
        // Through the same pump as a stream, so that body_timeout bounds each pause here too.
        var whole = ProxyResponse(status: status, headers: ProxyHeaders(fields),
                                  body: try await Self.pumped(response, length: length, for: request).collect(upTo: request.maxResponseBodySize))
        whole.reservation = reservation
        return whole
    }

    /// The answer's body as a ``BodyStream`` when the request allows streaming and the body's
    /// length is unknown or over ``OutboundRequest/streamThreshold`` (as on the pooled
    /// transport), else nil (read whole). AsyncHTTPClient's body sequence has backpressure of
    /// its own: a part is asked of it only when the stream's consumer wants one, so a client
    /// that does not read stops the upstream connection being read.
    static func stream(_ response: HTTPClientResponse, length: Int?, for request: OutboundRequest) -> BodyStream? {
        guard let threshold = request.streamThreshold, request.method != .head,
              response.status.code >= 200, response.status.code != 204, response.status.code != 304 else { return nil }
        if let length, length <= threshold { return nil }
        return pumped(response, length: length, for: request)
    }

    /// The answer's body as a ``BodyStream`` fed by AsyncHTTPClient's body sequence (whole
    /// answers are collected from it: one pause limit for both).
    static func pumped(_ response: HTTPClientResponse, length: Int?, for request: OutboundRequest) -> BodyStream {
        let eventLoop = MultiThreadedEventLoopGroup.currentEventLoop ?? MultiThreadedEventLoopGroup.singleton.any()
        let source = AsyncHTTPClientBodySource()
        let stream = BodyStream(eventLoop: eventLoop, expectedLength: length, source: source)
        source.pump(response.body, into: stream, request: request)
        return stream
    }

    static func map(_ error: any Error, _ request: OutboundRequest) -> ProxyError {
        let mapped = describe(error, request)
        return neverSent(error) ? mapped.neverSent : mapped
    }

    /// Whether `error` proves that no byte of the request was written: only errors that arise
    /// while a connection is being made (connect, TLS handshake and its certificate checks,
    /// proxy handshakes) or while the request waits in the pool for one. Anything else (a
    /// close, a reset, an unclean TLS shutdown) may have come after the request went out.
    static func neverSent(_ error: any Error) -> Bool {
        switch error {
        case let error as HTTPClientError:
            return [.connectTimeout, .getConnectionFromPoolTimeout, .tlsHandshakeTimeout, .socksHandshakeTimeout,
                    .httpProxyHandshakeTimeout].contains(error)
        case is NIOConnectionError, is NIOSSLExtraError:
            return true
        case let error as IOError:
            // Only a connect is refused; an established connection is reset instead.
            return error.errnoCode == ECONNREFUSED
        case let error as NIOSSLError:
            if case .handshakeFailed = error { return true }
            return false
        case let error as ChannelError:
            if case .connectTimeout = error { return true }
            return false
        default:
            return false
        }
    }

    static func describe(_ error: any Error, _ request: OutboundRequest) -> ProxyError {
        let target = request.endpoint.authority
        if let error = error as? HTTPClientError {
            switch error {
            case .deadlineExceeded, .readTimeout, .writeTimeout:
                return .upstreamTimeout("The upstream did not answer in time.", detail: "\(target) did not answer within \(request.timeout)")
            case .connectTimeout:
                return .upstreamTimeout("Connecting to the upstream timed out.", detail: "connecting to \(target) timed out")
            default:
                return .upstreamUnavailable("The upstream failed.", detail: "\(target) failed: \(error.shortDescription)")
            }
        }
        if error is CancellationError {
            return .upstreamUnavailable("The request to the upstream was cancelled.", detail: "the request to \(target) was cancelled")
        }
        return .upstreamUnavailable("The upstream is unreachable.", detail: "\(target) is unreachable: \(error)")
    }

    /// Closes every connection.
    public func shutdown() async throws {
        try await client.shutdown()
    }
}

/// Feeds a ``BodyStream`` from AsyncHTTPClient's response body: one part asked of it per part
/// the stream's consumer wants, the longest wait for a part `OutboundRequest.bodyTimeout`
/// (then `upstream_timeout`, and the request is cancelled, which closes its connection). A
/// consumer that leaves cancels the pump the same way.
final class AsyncHTTPClientBodySource: BodyStream.Source, Sendable {
    private struct State {
        var waiting: CheckedContinuation<Bool, Never>?
        var demanded = false
        var cancelled = false
        var timedOut = false
        var pump: Task<Void, Never>?
        var unstarted: Scheduled<Void>?
    }
    private let state = Mutex(State())

    /// The consumer started: the answer is no longer one nobody reads.
    package func bodyStarted() {
        state.withLock { state in
            defer { state.unstarted = nil }
            return state.unstarted
        }?.cancel()
    }

    package func bodyDemanded() {
        let waiting = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            guard let waiting = state.waiting else {
                state.demanded = true
                return nil
            }
            state.waiting = nil
            return waiting
        }
        waiting?.resume(returning: true)
    }

    package func bodyCancelled() {
        let (waiting, pump) = state.withLock { state in
            state.cancelled = true
            defer { state.waiting = nil }
            return (state.waiting, state.pump)
        }
        waiting?.resume(returning: false)
        pump?.cancel()
    }

    /// Waits until a part is wanted (true) or the consumer left (false).
    private func demand() async -> Bool {
        await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let answer: Bool? = state.withLock { state in
                if state.cancelled { return false }
                if state.demanded {
                    state.demanded = false
                    return true
                }
                state.waiting = continuation
                return nil
            }
            if let answer { continuation.resume(returning: answer) }
        }
    }

    private func timeOut() {
        let (waiting, pump) = state.withLock { state in
            state.timedOut = true
            state.cancelled = true
            defer { state.waiting = nil }
            return (state.waiting, state.pump)
        }
        waiting?.resume(returning: false)
        pump?.cancel()
    }

    func pump(_ body: HTTPClientResponse.Body, into stream: BodyStream, request: OutboundRequest) {
        let task = Task { [self] in
            var parts = body.makeAsyncIterator()
            while await demand() {
                let timer = stream.eventLoop.scheduleTask(in: .init(request.bodyTimeout)) { self.timeOut() }
                do {
                    let part = try await parts.next()
                    timer.cancel()
                    guard let part else {
                        stream.eventLoop.execute { stream.finish(nil) }
                        return
                    }
                    stream.eventLoop.execute { _ = stream.yield(part) }
                } catch {
                    timer.cancel()
                    let cut: ProxyError = state.withLock { $0.timedOut }
                        ? .upstreamTimeout("The upstream paused its answer for too long.",
                                           detail: "\(request.endpoint.authority) sent no part of the body for \(request.bodyTimeout)")
                        : AsyncHTTPClientTransport.map(error, request)
                    stream.eventLoop.execute { stream.finish(cut) }
                    return
                }
            }
            // The consumer left, or nobody started reading in time: dropping the body cancels
            // the request, which closes its connection.
            if state.withLock({ $0.timedOut }) {
                stream.eventLoop.execute {
                    stream.finish(.upstreamTimeout("Nobody read the upstream's answer in time.",
                                                   detail: "\(request.endpoint.authority): the answer was not read within \(request.bodyTimeout)"))
                }
            }
        }
        // An answer nobody starts reading within body_timeout (a decorator dropped it) is cut,
        // so its connection is not kept taken.
        let unstarted = stream.eventLoop.scheduleTask(in: .init(request.bodyTimeout)) { self.timeOut() }
        let cancelled = state.withLock { state in
            state.pump = task
            state.unstarted = unstarted
            return state.cancelled
        }
        if cancelled { task.cancel() }
    }
}
