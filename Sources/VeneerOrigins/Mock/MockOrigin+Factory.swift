import VeneerConfig
import VeneerCore

extension MockOrigin {
    /// The `mock` entry of the registry.
    public static let factory = OriginFactory(
        name: "mock",
        summary: "an in-memory posts API (create then get returns the post; ids from 1)",
        options: MockOriginOptions.docs,
        readsRequestBodies: true,
        decode: MockOriginOptions.decode,
        make: { options, context in
            // Same seed, same items: a reload keeps what was created since the start.
            let state = context.carried.value(for: .shared("mock", options.seedFile ?? (options.sample ? "<sample>" : "-"))) {
                MockOriginState(seed: options.seed)
            }
            return MockOrigin(state: state, latency: options.latency, clock: context.clock)
        }
    )
}
