import VeneerConfig
import VeneerCore

/// A built chain: its outermost handler and how the server answers through it.
public struct BuiltChain: Sendable {
    /// The outermost handler (the first decorator, or the origin).
    public let handler: any Handler
    /// Which fast path the whole chain supports, worked out once.
    public let plan: ChainPlan
    /// Each entry's name and handler, outermost first, the origin last: what the status page
    /// draws (a handler that is ``StatusReporting`` shows its figures).
    public let entries: [(name: String, handler: any Handler)]
}

/// The one place where chains are assembled: the origin first, then each decorator around
/// the handler built so far, from the last entry to the first, so that the first entry
/// is the outermost (it sees the request first and the response last). The chain's
/// ``ChainPlan`` is worked out here too, once per chain, and each factory is told which
/// entry it builds (``BuildContext/entry``), the owner of the state a reload carries over.
public enum ChainBuilder {
    /// Builds the chain of `spec`.
    public static func build(_ spec: EnvironmentSpec, context: BuildContext) async throws(ConfigError) -> BuiltChain {
        var handler: any Handler
        let base = "environments.\(spec.name)"
        var context = context
        let origin = ChainEntryIdentity(name: spec.origin.name, options: spec.origin.optionsIdentity, occurrence: 0)
        context.entry = origin
        do {
            handler = try await spec.origin.factory.make(options: spec.origin.options, context: context)
        } catch {
            throw ConfigError([ConfigDiagnostic(mark: spec.origin.mark, path: "\(base).origin.\(spec.origin.name)", message: Self.describe(error))])
        }
        var built = [handler]
        var names = [spec.origin.name]
        var problems: [ConfigDiagnostic] = []
        let entries = entryIdentities(spec.chain)
        var inside = [origin]
        for (decorator, entry) in zip(spec.chain, entries).reversed() {
            context.entry = entry
            context.inside = inside
            inside.insert(entry, at: 0)
            do {
                handler = try await decorator.factory.make(options: decorator.options, inner: handler, context: context)
                built.append(handler)
                names.append(decorator.name)
            } catch {
                problems.append(ConfigDiagnostic(mark: decorator.mark, path: "\(base).chain[\(decorator.site.index)].\(decorator.name)",
                                                 message: Self.describe(error)))
            }
        }
        if !problems.isEmpty { throw ConfigError(problems.reversed()) }
        return BuiltChain(handler: handler, plan: ChainPlan(outermostFirst: built.reversed()),
                          entries: zip(names, built).reversed().map { (name: $0, handler: $1) })
    }

    /// Each entry's name, options and rank among the identical entries before it: what
    /// its carried state is kept by, so that inserting or removing other entries keeps it.
    static func entryIdentities(_ chain: [DecoratorSpec]) -> [ChainEntryIdentity] {
        var seen: [ChainEntryIdentity: Int] = [:]
        return chain.map { decorator in
            let first = ChainEntryIdentity(name: decorator.name, options: decorator.optionsIdentity, occurrence: 0)
            let occurrence = seen[first, default: 0]
            seen[first] = occurrence + 1
            return ChainEntryIdentity(name: decorator.name, options: decorator.optionsIdentity, occurrence: occurrence)
        }
    }

    static func describe(_ error: any Error) -> String {
        if let error = error as? ConfigError { return error.description }
        return ErrorText.describe(error)
    }
}
