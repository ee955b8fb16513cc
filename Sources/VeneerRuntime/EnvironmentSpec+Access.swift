import VeneerConfig
import VeneerServer

extension EnvironmentSpec {
    /// What the edge checks of Host and Origin for this environment.
    var access: EdgeAccess {
        // The names a TCP listener answers for (a Unix socket's Host is not checked).
        let host = listeners.first { $0.socketPath == nil }?.host ?? "127.0.0.1"
        return EdgeAccess(listenHost: host, adminListenHost: adminListen.flatMap { $0.socketPath == nil ? $0.host : nil }, allowedHosts: allowedHosts, allowedOrigins: allowedOrigins)
    }
}
