import Foundation
import Synchronization
import VeneerCore

/// The time of a `latency_log` line, as ``Timestamp/appendISO8601(_:to:)`` writes it
/// (`2027-01-15T08:00:01.234Z`), its text up to the second made once a second and only the
/// milliseconds written per line: the whole text cost a hit some 600 instructions (callgrind).
final class LineTime: Sendable {
    /// The text of one second, milliseconds and all (those are written over).
    private struct Second {
        var epochSecond = Int.min
        var text: (UInt64, UInt64, UInt64) = (0, 0, 0)
    }

    private let last = Mutex(Second())

    /// Where the milliseconds' three digits begin in the text.
    private static let millisecondsOffset = 20

    /// `date` at `out`: ``Timestamp/iso8601Length`` bytes.
    func append(_ date: Date, to out: inout ByteCursor) {
        // As Timestamp reckons them: whole milliseconds, the years clamped to 0001...9999.
        let years = Date.epochSecondsOfYears
        let millis = Int.clamping(date.timeIntervalSince1970 * 1000, to: (years.lowerBound * 1000)...(years.upperBound * 1000 + 999))
        let second = millis >= 0 ? millis / 1000 : (millis - 999) / 1000
        let fraction = millis - second * 1000
        var text = last.withLock { last in last.epochSecond == second ? last.text : nil }
        if text == nil {
            var made: (UInt64, UInt64, UInt64) = (0, 0, 0)
            withUnsafeMutableBytes(of: &made) { room in
                var cursor = ByteCursor(room)
                Timestamp.appendISO8601(date, to: &cursor)
            }
            last.withLock { $0 = Second(epochSecond: second, text: made) }
            text = made
        }
        out.append(upTo: Timestamp.iso8601Length) { room in
            withUnsafeBytes(of: text!) { room.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[..<Timestamp.iso8601Length])) }
            room[Self.millisecondsOffset] = UInt8(ascii: "0") + UInt8(fraction / 100)
            room[Self.millisecondsOffset + 1] = UInt8(ascii: "0") + UInt8(fraction / 10 % 10)
            room[Self.millisecondsOffset + 2] = UInt8(ascii: "0") + UInt8(fraction % 10)
            return Timestamp.iso8601Length
        }
    }
}
