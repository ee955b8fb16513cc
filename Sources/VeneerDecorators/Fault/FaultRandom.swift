import Synchronization

/// The draws of one `fault` decorator: splitmix64 from a seed, so that a seeded run draws
/// the same sequence again (the same requests in the same order get the same faults).
public final class FaultRandom: Sendable {
    private let state: Mutex<UInt64>

    /// A sequence from `seed`, or from a random seed.
    public init(seed: UInt64?) {
        state = Mutex(seed ?? UInt64.random(in: .min ... .max))
    }

    /// The next 64 random bits.
    public func next() -> UInt64 {
        var value = state.withLock { state in
            state &+= 0x9E37_79B9_7F4A_7C15
            return state
        }
        value = (value ^ (value >> 30)) &* 0xBF58_476D_1CE4_E5B9
        value = (value ^ (value >> 27)) &* 0x94D0_49BB_1331_11EB
        return value ^ (value >> 31)
    }

    /// Whether a draw falls within `percent` (0...100); 0 and 100 need no draw.
    public func chance(_ percent: Double) -> Bool {
        if percent >= 100 { return true }
        if percent <= 0 { return false }
        return Double(next() >> 11) / Double(1 << 53) * 100 < percent
    }

    /// A duration drawn evenly from `minimum...maximum` (no draw when they are equal).
    public func duration(from minimum: Duration, to maximum: Duration) -> Duration {
        guard maximum > minimum else { return minimum }
        let span = (maximum - minimum).nanoseconds
        return minimum + .nanoseconds(Int64(next() % UInt64(span + 1)))
    }
}

extension Duration {
    var nanoseconds: Int64 {
        let parts = components
        return parts.seconds * 1_000_000_000 + parts.attoseconds / 1_000_000_000
    }
}
