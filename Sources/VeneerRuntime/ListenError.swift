import VeneerServer

/// A listener that could not open its socket, naming the address (the command line exits
/// 69 on it; it sees the runtime, not the server module).
public typealias ListenError = VeneerServer.ListenError
