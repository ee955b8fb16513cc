import HTTPTypes
import Synchronization
import VeneerCore

/// The `Age` and `Cache-Status` fields of fresh hits, kept for the last few (age, ttl) pairs
/// seen: hits of entries stored at about the same time share them rather than each making
/// its two texts and two fields again (the status text allocated, each value checked byte by
/// byte by `HTTPField.init`: some 1,000 instructions a hit, callgrind). The same texts either way.
///
/// Four slots, chosen by the age's two low bits, so that entries a second apart do not take
/// each other's place. The lock is only tried, never waited for: a hit that finds it taken
/// (another event loop's hit at that very moment) makes its own fields, as it would without.
final class FreshHitFields: Sendable {
    /// The fields of fresh hits `age` seconds old with `ttl` seconds to live. A class of
    /// immutable parts: a hit takes a reference out of its slot, not a copy of each part.
    final class Made: Sendable {
        let age: Int
        let ttl: Int
        let ageField: HTTPField
        /// `veneer; hit; ttl=N` (``CacheDecorator/freshHitStatus(ttl:)``).
        let status: String
        let statusField: HTTPField

        init(age: Int, ttl: Int, ageField: HTTPField, status: String, statusField: HTTPField) {
            self.age = age
            self.ttl = ttl
            self.ageField = ageField
            self.status = status
            self.statusField = statusField
        }
    }

    private let slots = Mutex<[Made?]>(Array(repeating: nil, count: 4))

    /// The fields for `age` and `ttl`: those kept, else made (and kept).
    func fields(age: Int, ttl: Int) -> Made {
        let slot = age & 3
        let kept = slots.withLockIfAvailable { slots -> Made? in
            guard let kept = slots[slot], kept.age == age, kept.ttl == ttl else { return nil }
            return kept
        }
        if let kept, let kept { return kept }
        let made = Self.make(age: age, ttl: ttl)
        _ = slots.withLockIfAvailable { $0[slot] = made }
        return made
    }

    static func make(age: Int, ttl: Int) -> Made {
        let status = CacheDecorator.freshHitStatus(ttl: ttl)
        return Made(age: age, ttl: ttl, ageField: HTTPField(name: .age, value: String(age)), status: status,
                    statusField: HTTPField(name: .cacheStatus, value: status))
    }
}
