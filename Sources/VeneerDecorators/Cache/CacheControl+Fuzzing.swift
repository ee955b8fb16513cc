/// What the cache reads from `Cache-Control`, `Age` and targeted fields, for the
/// `cache-headers` fuzz target (README, Fuzzing), which compares readings of the same values
/// given in different ways. Not part of the decorators' interface.
@_spi(Fuzzing)
public enum CacheHeaderReading {
    /// The directives that `Cache-Control` fields with these values give, as text.
    public static func cacheControl(_ values: [String]) -> String {
        String(describing: CacheControl(values))
    }

    /// The directives of a targeted field (RFC 9213) with this value, as text; nil when it
    /// does not parse.
    public static func targetedCacheControl(_ value: String) -> String? {
        CacheControl(targeted: value).map { String(describing: $0) }
    }

    /// The `Age` these field values give.
    public static func age(_ values: [String]) -> Int? {
        CacheControl.age(values)
    }
}
