import VeneerConfig
import VeneerDecorators
import VeneerOrigins

extension Registry {
    /// Veneer's own decorators and origins. Code that links Veneer as a library starts from
    /// this and calls ``Registry/register(_:)-(DecoratorFactory)`` for its own.
    public static let standard = Registry(
        decorators: [
            LatencyLogDecorator.factory,
            CacheDecorator.factory,
            AuthRefreshDecorator.factory,
            BlockListDecorator.factory,
            FaultDecorator.factory,
            RecordDecorator.factory,
        ],
        origins: [
            MockOrigin.factory,
            UpstreamOrigin.factory,
            ReplayOrigin.factory,
        ]
    )
}
