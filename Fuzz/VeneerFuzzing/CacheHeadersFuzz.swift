import Foundation
@_spi(Fuzzing) import VeneerDecorators
import VeneerCore

/// The cache's readings of an upstream's headers: HTTP-dates (`Date`, `Expires`,
/// `Last-Modified`), `Cache-Control` and targeted cache fields (RFC 9213), `Age`. The input
/// is field values, one a line.
///
/// Checks: no crash or hang; a date that parses, written as IMF-fixdate and read again, is
/// the same instant, and its letters may be in any case; several `Cache-Control` lines mean
/// what they mean joined by commas (RFC 9110 §5.3); an `Age` is never negative.
public enum CacheHeadersFuzz {
    static let reference = Date(timeIntervalSince1970: 1_795_392_000)  // 2026-11-23

    /// The target's body.
    public static func run(_ bytes: UnsafeRawBufferPointer) throws(FuzzFinding) {
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        for line in lines {
            try checkDate(line)
            _ = CacheHeaderReading.targetedCacheControl(line)
        }
        if let age = CacheHeaderReading.age(lines), age < 0 { throw FuzzFinding("a negative Age: \(age)") }
        // An unbalanced quote runs on into the next line once they are joined: only balanced lines compare.
        if lines.allSatisfy({ $0.utf8.count { $0 == UInt8(ascii: "\"") } % 2 == 0 }) {
            let separate = CacheHeaderReading.cacheControl(lines)
            let joined = CacheHeaderReading.cacheControl([lines.joined(separator: ", ")])
            guard separate == joined else {
                throw FuzzFinding("Cache-Control lines \(lines) read \(separate), joined by commas \(joined)")
            }
        }
    }

    static func checkDate(_ text: String) throws(FuzzFinding) {
        guard let date = HTTPDate.parse(text, reference: reference) else { return }
        let seconds = date.timeIntervalSince1970
        guard seconds == seconds.rounded(.down) else { throw FuzzFinding("\(text.debugDescription) read as a fraction of a second: \(seconds)") }
        let written = HTTPDate.format(Int(seconds))
        guard HTTPDate.parse(written, reference: reference) == date else {
            throw FuzzFinding("\(text.debugDescription) read as \(seconds), written as \(written), which reads otherwise")
        }
        for other in [asciiCased(text, upper: true), asciiCased(text, upper: false)] where HTTPDate.parse(other, reference: reference) != date {
            throw FuzzFinding("\(text.debugDescription) and \(other.debugDescription) read differently")
        }
    }

    static func asciiCased(_ text: String, upper: Bool) -> String {
        String(decoding: text.utf8.map { byte in
            let letter = (byte | 0x20) >= UInt8(ascii: "a") && (byte | 0x20) <= UInt8(ascii: "z")
            return letter ? (upper ? byte & ~0x20 : byte | 0x20) : byte
        }, as: UTF8.self)
    }
}
