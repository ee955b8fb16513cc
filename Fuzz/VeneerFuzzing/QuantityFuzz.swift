import VeneerCore

/// The one parser of numbers from outside (``Bounded``): durations, sizes, counts and
/// percentages. The first byte picks the kind and the bounds, the rest is the text.
///
/// Checks: no crash (a duration once overflowed its conversion to nanoseconds after the range
/// check); a value read lies within its bounds; a duration or size written back
/// (``Units/format(_:)``) reads as the same value; and the bounds only cut: a text that reads
/// within the widest bounds reads the same within narrower ones that hold it, and is out of
/// range (never malformed) in those that do not.
public enum QuantityFuzz {
    static let durations: [Bounded<Durations>] = [
        .init(.zero ... .seconds(60)), .init(.milliseconds(1) ... .seconds(3600)), .init(.zero ... .days(365)),
    ]
    static let sizes: [Bounded<Sizes>] = [.init((4 << 10)...(64 << 20)), .init(0...(1 << 30)), .init(0...(1 << 40))]
    static let counts: [Bounded<Counts>] = [.init(1...1024), .init(400...599), .init(0...Int.max), .init(Int.min...Int.max)]
    static let percentages = Bounded<Percentages>(0...100)

    /// The target's body.
    public static func run(_ bytes: UnsafeRawBufferPointer) throws(FuzzFinding) {
        guard let selector = bytes.first else { return }
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: bytes.dropFirst()), as: UTF8.self)
        switch selector % 4 {
        case 0:
            try check(text, durations[Int(selector / 4) % durations.count], widest: Units.anyDuration, roundTrip: true)
        case 1:
            try check(text, sizes[Int(selector / 4) % sizes.count], widest: Units.anySize, roundTrip: true)
        case 2:
            try check(text, counts[Int(selector / 4) % counts.count], widest: Bounded<Counts>(Int.min...Int.max), roundTrip: true)
        default:
            try check(text, percentages, widest: Bounded<Percentages>(-Double.greatestFiniteMagnitude...Double.greatestFiniteMagnitude),
                      roundTrip: false)
        }
    }

    static func check<Kind: QuantityKind>(_ text: String, _ bounds: Bounded<Kind>, widest: Bounded<Kind>, roundTrip: Bool) throws(FuzzFinding) {
        let narrow = bounds.parse(text)
        let wide = widest.parse(text)
        if case .success(let value) = narrow, !bounds.range.contains(value) {
            throw FuzzFinding("'\(text)' read as \(value), outside \(bounds)")
        }
        switch wide {
        case .success(let value):
            if roundTrip, widest.value(Kind.format(value)) != value {
                throw FuzzFinding("'\(text)' read as \(value), written as '\(Kind.format(value))', which reads otherwise")
            }
            let expected: Result<Kind.Value, QuantityError> = bounds.range.contains(value)
                ? .success(value) : .failure(.outOfRange(bounds.description, below: value < bounds.minimum))
            guard "\(narrow)" == "\(expected)" else {
                throw FuzzFinding("'\(text)' read as \(value) within \(widest), but as \(narrow) within \(bounds)")
            }
        case .failure(.malformed):
            guard case .failure(.malformed) = narrow else { throw FuzzFinding("'\(text)' is malformed within \(widest) only") }
        case .failure(.outOfRange):
            guard case .failure(.outOfRange) = narrow else { throw FuzzFinding("'\(text)' is beyond \(widest) but \(narrow) within \(bounds)") }
        }
    }
}
