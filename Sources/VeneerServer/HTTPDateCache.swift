import Foundation
import Synchronization
import VeneerCore

/// `Date` header text (RFC 9110 IMF-fixdate), formatted at most once a second.
final class HTTPDateCache: Sendable {
    private let cache = Mutex<(second: Int, text: String)>((-1, ""))

    func now() -> String {
        // time(2) is a vDSO read of the coarse clock: far cheaper than a Date per response.
        let second = time(nil)
        return cache.withLock { cache in
            if cache.second != second { cache = (second, HTTPDate.format(second)) }
            return cache.text
        }
    }
}
