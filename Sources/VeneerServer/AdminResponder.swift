import HTTPTypes
import NIOCore
import VeneerCore

/// Answers the admin API under `/-/` (the runtime's health, chain and metrics, and the
/// routes decorators add); the edge checks who may ask before it does.
public protocol AdminResponder: Sendable {
    /// Answers one admin request; `path` is what follows `/-/`.
    func respond(method: HTTPRequest.Method, path: String, query: String?, headers: HTTPFields, body: ByteBuffer) async -> ProxyResponse
    /// A streamed answer for a GET of `path` (what follows `/-/`), if that path streams; asked before `respond`, after the edge's checks.
    func stream(path: String, query: String?, headers: HTTPFields) -> AdminStream?
}

extension AdminResponder {
    /// No path streams.
    public func stream(path: String, query: String?, headers: HTTPFields) -> AdminStream? { nil }
}
