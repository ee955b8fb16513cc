import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import NIOPosix
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization

/// What a ``TestUpstream`` received.
public struct RecordedRequest: Sendable {
    /// The method.
    public let method: String
    /// The request target exactly as received (path and query).
    public let target: String
    /// The `Host` the proxy sent.
    public let host: String?
    /// Every header field, names lower-cased.
    public let headers: [(name: String, value: String)]
    /// The body.
    public let body: [UInt8]

    /// The first value of a header.
    public func header(_ name: String) -> String? {
        headers.first { $0.name == name.lowercased() }?.value
    }

    /// The body as text.
    public var text: String { String(decoding: body, as: UTF8.self) }
}

/// What a ``TestUpstream`` answers.
public struct UpstreamReply: Sendable {
    /// Status code.
    public var status: Int
    /// Header fields.
    public var headers: [(String, String)]
    /// Body.
    public var body: String
    /// Wait this long before answering.
    public var delay: Duration
    /// Awaited after `delay`, before the answer: a test that decides when an answer comes
    /// (rather than a timer a loaded machine may miss) returns from it then.
    public var gate: (@Sendable () async -> Void)?
    /// Called just before the answer is written (after `delay` and `gate`).
    public var onAnswer: (@Sendable () -> Void)?

    /// Creates a reply.
    public init(status: Int = 200, headers: [(String, String)] = [("Content-Type", "application/json")], body: String = "{}", delay: Duration = .zero) {
        self.status = status
        self.headers = headers
        self.body = body
        self.delay = delay
    }

    /// A JSON reply.
    public static func json(_ body: String, status: Int = 200, headers: [(String, String)] = []) -> UpstreamReply {
        UpstreamReply(status: status, headers: [("Content-Type", "application/json")] + headers, body: body)
    }
}

/// A real HTTP upstream for tests: Hummingbird on 127.0.0.1 and a free port, answering
/// with a closure and counting and recording every request it receives.
public final class TestUpstream: Sendable {
    /// The port it listens on.
    public let port: Int
    private let recorded: RequestLog
    private let group: ServiceGroup
    private let task: Task<Void, any Error>

    /// The requests received so far.
    public var requests: [RecordedRequest] { recorded.all }
    /// How many requests were received.
    public var count: Int { recorded.all.count }
    /// Forgets what was recorded so far.
    public func reset() { recorded.reset() }
    /// `http://127.0.0.1:PORT`.
    public var url: String { "http://127.0.0.1:\(port)" }

    /// Starts an upstream; stop it with ``stop()`` (or use ``withTestUpstream(_:_:)``).
    ///
    /// It runs Hummingbird's HTTP/1.1 server without the Application layer, so that the
    /// replies carry exactly the headers a test gives (no `Date` unless asked for): cache
    /// tests that move a manual clock need that.
    public static func start(port requestedPort: Int = 0, _ handler: @escaping @Sendable (RecordedRequest) async throws -> UpstreamReply) async throws -> TestUpstream {
        let recorded = RequestLog()
        let responder: HTTPChannelHandler.Responder = { request, writer, _ in
            var body = try await request.body.collect(upTo: 64 << 20)
            let bytes = body.readBytes(length: body.readableBytes) ?? []
            let record = RecordedRequest(
                method: request.method.rawValue, target: request.head.path ?? "", host: request.head.authority,
                headers: request.headers.map { ($0.name.canonicalName, $0.value) }, body: bytes)
            recorded.append(record)
            let reply: UpstreamReply
            do {
                reply = try await handler(record)
            } catch {
                reply = UpstreamReply(status: 500, body: "{}")
            }
            if reply.delay > .zero { try await Task.sleep(for: reply.delay) }
            await reply.gate?()
            reply.onAnswer?()
            var fields = HTTPFields()
            for (name, value) in reply.headers { fields.append(HTTPField(name: HTTPField.Name(name)!, value: value)) }
            let bodyBuffer = ByteBuffer(string: reply.body)
            if fields[.contentLength] == nil { fields[.contentLength] = String(bodyBuffer.readableBytes) }
            try await writer.write(response: HTTPResponse(status: .init(code: reply.status), headerFields: fields),
                                   body: ResponseBody(byteBuffer: bodyBuffer))
        }
        let (stream, continuation) = AsyncStream<Int>.makeStream()
        var logger = Logger(label: "test-upstream")
        logger.logLevel = .critical
        let server = Server(
            childChannelSetup: HTTP1Channel(responder: responder),
            configuration: ServerConfiguration(address: .hostname("127.0.0.1", port: requestedPort)),
            onServerRunning: { channel in continuation.yield(channel.localAddress?.port ?? 0) },
            eventLoopGroup: MultiThreadedEventLoopGroup.singleton,
            logger: logger)
        let group = ServiceGroup(configuration: .init(services: [server], logger: logger))
        // The stream ends when the server does: a failed bind (a port asked for and taken)
        // is thrown here instead of waiting for a start that never comes.
        let task = Task {
            defer { continuation.finish() }
            try await group.run()
        }
        var iterator = stream.makeAsyncIterator()
        guard let port = await iterator.next() else {
            try await task.value
            throw CancellationError()
        }
        return TestUpstream(port: port, recorded: recorded, group: group, task: task)
    }

    private init(port: Int, recorded: RequestLog, group: ServiceGroup, task: Task<Void, any Error>) {
        self.port = port
        self.recorded = recorded
        self.group = group
        self.task = task
    }

    /// Stops the server.
    public func stop() async {
        await group.triggerGracefulShutdown()
        _ = try? await task.value
    }
}

/// Runs `body` with a started upstream and stops it afterwards.
public func withTestUpstream<T>(
    _ handler: @escaping @Sendable (RecordedRequest) async throws -> UpstreamReply,
    _ body: (TestUpstream) async throws -> T
) async throws -> T {
    let upstream = try await TestUpstream.start(handler)
    do {
        let result = try await body(upstream)
        await upstream.stop()
        return result
    } catch {
        await upstream.stop()
        throw error
    }
}

final class RequestLog: Sendable {
    private let entries = Mutex<[RecordedRequest]>([])
    var all: [RecordedRequest] { entries.withLock { $0 } }
    func append(_ request: RecordedRequest) { entries.withLock { $0.append(request) } }
    func reset() { entries.withLock { $0.removeAll() } }
}
