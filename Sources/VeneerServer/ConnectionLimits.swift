/// What bounds the client connections of one listener (`limits` and `idle_timeout` of the
/// environment): time, memory and descriptors a client can hold.
public struct ConnectionLimits: Sendable, Equatable {
    /// The largest request head (request line and fields).
    public var requestHeaders: Int
    /// How long a whole request head may take to arrive, from its first byte (else 408).
    public var headerTimeout: Duration
    /// How long a request body may pause between two reads (else 408).
    public var bodyTimeout: Duration
    /// How long a connection with nothing to do stays open.
    public var idleTimeout: Duration
    /// How many bytes of answers may wait unsent before the connection is no longer read.
    public var outputBuffer: Int
    /// How many requests may wait for their answers on one connection before it is no longer read.
    public var pipelineDepth: Int
    /// How many connections may be open at once; beyond it new ones are closed at once.
    public var connections: Int

    /// Limits, each as `limits` documents it.
    public init(requestHeaders: Int = 32 << 10, headerTimeout: Duration = .seconds(10), bodyTimeout: Duration = .seconds(30),
                idleTimeout: Duration = .seconds(75), outputBuffer: Int = 256 << 10, pipelineDepth: Int = 16, connections: Int = 10_000) {
        self.requestHeaders = requestHeaders
        self.headerTimeout = headerTimeout
        self.bodyTimeout = bodyTimeout
        self.idleTimeout = idleTimeout
        self.outputBuffer = outputBuffer
        self.pipelineDepth = pipelineDepth
        self.connections = connections
    }
}
