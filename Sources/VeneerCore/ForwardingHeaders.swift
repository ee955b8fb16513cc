import HTTPTypes

/// Request headers that tell an origin where a request came from or what it "really" was,
/// which a caller must not set: an origin that reflects them (in links, redirects, routing)
/// would store the caller's word in the shared cache for everyone, since they are not part
/// of its key. The edge strips them unless `pass_forwarding_headers` names them, and then
/// the cache keys on them. `X-Forwarded-For` is one of them: the upstream origin sets its
/// own, the client's address, so that its leftmost entry is never a caller's invention
/// (with `pass_forwarding_headers: [X-Forwarded-For]`, a trusted proxy's list is appended to).
public struct ForwardingHeaders: Sendable, Hashable {
    /// The headers stripped by default, lower-case.
    public static let stripped: [String] = [
        "forwarded", "x-forwarded-for", "x-forwarded-host", "x-forwarded-proto", "x-forwarded-port", "x-forwarded-prefix", "x-forwarded-server",
        "x-forwarded-scheme", "x-forwarded-ssl", "x-original-url", "x-original-host", "x-rewrite-url", "x-real-ip", "x-http-method-override",
        "x-http-method", "x-method-override",
    ]

    /// The names passed on, as configured.
    public let passed: [HTTPField.Name]
    private let removed: Set<String>

    /// Strips every one of ``stripped`` but `passed` (names as `pass_forwarding_headers` lists them).
    public init(passing passed: [String] = []) {
        self.passed = passed.compactMap { HTTPField.Name($0) }
        removed = Set(Self.stripped).subtracting(self.passed.map(\.canonicalName))
    }

    /// Removes from `fields` the forwarding headers not passed, and every field whose name
    /// has `_` (as nginx does): a `Transfer_Encoding` or `X_Forwarded_Host` may be read as its
    /// `-` twin by a server behind, where no rule of Veneer's looked at it.
    public func strip(_ fields: inout HTTPFields) {
        // One pass that finds nothing, the usual case, and changes nothing.
        guard fields.contains(where: removes) else { return }
        fields = HTTPFields(fields.filter { !removes($0) })
    }

    @inline(__always)
    private func removes(_ field: HTTPField) -> Bool {
        let name = field.name.canonicalName.utf8
        if name.contains(UInt8(ascii: "_")) { return true }
        // Every stripped name begins with 'x' or 'f': no set lookup for the others.
        guard let first = name.first, first == UInt8(ascii: "x") || first == UInt8(ascii: "f") else { return false }
        return removed.contains(field.name.canonicalName)
    }
}
