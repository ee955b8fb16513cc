/// The fuzz targets: each one's body, run by its libFuzzer executable (`make fuzz`) and by the
/// corpus replay tests (`make test`) alike.
public enum FuzzTarget: String, CaseIterable, Sendable {
    /// ``RequestParserFuzz``.
    case request
    /// ``ResponseParserFuzz``.
    case response
    /// ``RequestDifferentialFuzz``.
    case differential
    /// ``ConfigLoaderFuzz``.
    case config
    /// ``CacheHeadersFuzz``.
    case cacheHeaders = "cache-headers"
    /// ``FaultHeaderFuzz``.
    case faultHeader = "fault-header"
    /// ``QuantityFuzz``.
    case quantities

    /// Runs the target on one input; throws what it found wrong.
    public func run(_ bytes: UnsafeRawBufferPointer) throws(FuzzFinding) {
        switch self {
        case .request: try RequestParserFuzz.run(bytes)
        case .response: try ResponseParserFuzz.run(bytes)
        case .differential: try RequestDifferentialFuzz.run(bytes)
        case .config: try ConfigLoaderFuzz.run(bytes)
        case .cacheHeaders: try CacheHeadersFuzz.run(bytes)
        case .faultHeader: try FaultHeaderFuzz.run(bytes)
        case .quantities: try QuantityFuzz.run(bytes)
        }
    }

    /// The body of `LLVMFuzzerTestOneInput`: a finding stops the process, so that libFuzzer
    /// keeps the input as a crash artifact.
    public func fuzz(_ start: UnsafeRawPointer?, _ count: Int) -> Int32 {
        do {
            try run(UnsafeRawBufferPointer(start: count == 0 ? nil : start, count: count))
        } catch {
            fatalError("fuzz-\(rawValue): \(error)")
        }
        return 0
    }
}

/// Something a target found wrong: what it checked, and what it saw.
public struct FuzzFinding: Error, CustomStringConvertible, Sendable {
    /// One sentence.
    public let description: String

    init(_ description: String) {
        self.description = description
    }
}
