// What the decorator contract is spoken in: the HTTP types of a request and an answer, the
// bytes of a body, and the logger of the build context. Exported, as Hummingbird exports
// them, so that a decorator written outside Veneer (Examples/rate-limit) depends on Veneer's
// products and nothing else.
@_exported import HTTPTypes
@_exported import struct Logging.Logger
@_exported import struct NIOCore.ByteBuffer
