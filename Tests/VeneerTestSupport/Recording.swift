import HTTPTypes
import NIOCore
import Synchronization
import VeneerCore
import VeneerDecorators

/// A handler that records what reaches it and answers with a closure: the inner handler
/// of decorator tests.
public final class RecordingHandler: Handler {
    private let received = Mutex<[ProxyRequest]>([])
    private let answer: @Sendable (ProxyRequest) async throws -> ProxyResponse

    /// A recorder answering with `answer` (by default 200 `{}`).
    public init(_ answer: @escaping @Sendable (ProxyRequest) async throws -> ProxyResponse = { _ in .json(.ok, ByteBuffer(string: "{}")) }) {
        self.answer = answer
    }

    /// The requests received.
    public var requests: [ProxyRequest] { received.withLock { $0 } }
    /// How many.
    public var count: Int { received.withLock { $0.count } }

    /// Records and answers.
    public func handle(_ request: ProxyRequest) async throws -> ProxyResponse {
        received.withLock { $0.append(request) }
        return try await answer(request)
    }
}

/// A log sink that keeps the lines.
public final class CollectingSink: LogLineSink {
    private let collected = Mutex<[String]>([])
    /// A new, empty sink.
    public init() {}
    /// Keeps the line.
    public func write(_ line: ByteBuffer) { collected.withLock { $0.append(String(buffer: line)) } }
    /// The lines, without their newlines.
    public var lines: [String] { collected.withLock { $0.map { String($0.dropLast()) } } }
}

extension ProxyRequest {
    /// A GET of `/posts/{id}` for tests.
    public static func getPost(_ id: Int, headers: HTTPFields = [:]) -> ProxyRequest {
        ProxyRequest(method: .get, route: .item(.posts, String(id)), headers: headers)
    }
}
