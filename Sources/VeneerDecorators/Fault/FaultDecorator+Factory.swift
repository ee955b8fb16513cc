import VeneerConfig
import VeneerCore

extension FaultDecorator {
    /// The `fault` entry of the registry.
    public static let factory = DecoratorFactory(
        name: "fault",
        summary: "breaks requests on purpose: aborts (a status or a dropped connection) and delays, by percentage, route and method",
        options: FaultOptions.docs,
        requestDirectives: [.veneerFault],
        decode: FaultOptions.decode,
        make: { options, inner, context in
            FaultDecorator(inner: inner, options: options, random: FaultRandom(seed: options.seed), clock: context.clock)
        }
    )
}
