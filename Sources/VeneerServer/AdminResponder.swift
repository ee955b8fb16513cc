import HTTPTypes
import NIOCore
import VeneerCore

/// Answers the admin API under `/-/` (the runtime's health, chain and metrics, and the
/// routes decorators add); the edge checks who may ask before it does.
public protocol AdminResponder: Sendable {
    /// Answers one admin request; `path` is what follows `/-/`.
    func respond(method: HTTPRequest.Method, path: String, query: String?, headers: HTTPFields, body: ByteBuffer) async -> ProxyResponse
    /// A streamed answer for a GET of `path` (what follows `/-/`), if that path streams; asked before `respond`, after the edge's checks.
    /// Asked on the connection's event loop: it must not block. A HEAD asks it too and gets the head alone (the stream is stopped
    /// at once); past ``AdminStream/maxConcurrent`` streams the stream is stopped and the client gets 503.
    func stream(path: String, query: String?, headers: HTTPFields) -> AdminStream?
}

extension AdminResponder {
    /// No path streams.
    public func stream(path: String, query: String?, headers: HTTPFields) -> AdminStream? { nil }
}
