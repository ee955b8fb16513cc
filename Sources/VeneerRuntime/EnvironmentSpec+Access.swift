import VeneerConfig
import VeneerServer

extension EnvironmentSpec {
    /// What the edge checks of Host and Origin for this environment.
    var access: EdgeAccess {
        EdgeAccess(listenHost: listen.host, adminListenHost: adminListen?.host, allowedHosts: allowedHosts, allowedOrigins: allowedOrigins)
    }
}
