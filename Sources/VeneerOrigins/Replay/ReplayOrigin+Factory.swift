import VeneerConfig
import VeneerCore

extension ReplayOrigin {
    /// The `replay` entry of the registry.
    public static let factory = OriginFactory(
        name: "replay",
        summary: "answers from HAR files (method, path and query; the latest entry wins); misses get 404 or go upstream",
        options: ReplayOriginOptions.docs,
        decode: ReplayOriginOptions.decode,
        make: { options, context in
            var fallback: (any Handler)?
            if options.onMiss == .upstream, let upstream = options.upstream {
                fallback = try await UpstreamOrigin.factory.make(options: upstream, context: context)
            }
            return ReplayOrigin(book: options.book, fallback: fallback)
        }
    )
}
