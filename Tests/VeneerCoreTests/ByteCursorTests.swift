import Foundation
import NIOCore
import Testing
@testable import VeneerCore

@Suite("ByteCursor: texts written in place")
struct ByteCursorTests {
    func written(_ length: Int, _ write: (inout ByteCursor) -> Void) -> String {
        var buffer = ByteBuffer(string: "<")
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: length) { raw in
            var cursor = ByteCursor(raw)
            write(&cursor)
            #expect(cursor.offset <= length)
            return cursor.offset
        }
        return String(buffer: buffer)
    }

    @Test("a JSON string literal is what JSONText writes, for text that needs no escape and text that does")
    func jsonQuoted() {
        for text in ["", "req-1", "veneer; hit; ttl=3600", "a\"b\\c", "line\nbreak\r\ttab", "\u{0}\u{1}\u{1F}\u{7F}", "é ü 🙂", String(repeating: "\"", count: 40)] {
            var expected = ByteBuffer(string: "<")
            JSONText.writeQuoted(text, into: &expected)
            #expect(written(ByteCursor.jsonQuotedLength(text)) { $0.appendJSONQuoted(text) } == String(buffer: expected), "\(text)")
        }
        #expect(JSONText.quoted("a\"b\\c\n\u{1}é") == #""a\"b\\c\n\u0001é""#)
        #expect(JSONText.quoted("plain") == #""plain""#)
    }

    @Test("decimals, bytes, texts and static texts are written as they are")
    func pieces() {
        let text = written(200) { cursor in
            for value in [0, 7, 10, 99, 100, 123_456_789, Int.max, -1, Int.min] {
                cursor.appendDecimal(value)
                cursor.append(byte: UInt8(ascii: ","))
            }
            cursor.append("static;")
            cursor.append([UInt8(ascii: "b"), UInt8(ascii: ";")])
            cursor.append("é text;")
            cursor.append(raw: UnsafeRawBufferPointer(start: nil, count: 0))
        }
        #expect(text == "<0,7,10,99,100,123456789,\(Int.max),-1,\(Int.min),static;b;é text;")
    }

    @Test("static texts of one character and of none are written as the longer ones")
    func oneCharacterStaticText() {
        let quote: StaticString = "\""
        let empty: StaticString = ""
        let letter: StaticString = "é"
        #expect(written(8) { cursor in
            cursor.append(quote)
            cursor.append(empty)
            cursor.append(letter)
            cursor.append(quote)
        } == "<\"é\"")
    }

    @Test("a debug build stops at the first write past the reckoned room, not after it")
    func writePastTheReckoningStops() async {
        await #expect(processExitsWith: .failure) {
            var buffer = ByteBuffer()
            buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: 64) { raw in
                var cursor = ByteCursor(raw, reserved: 4)
                cursor.append("four")
                cursor.append(byte: UInt8(ascii: "!"))
                return cursor.offset
            }
        }
    }

    @Test("an ISO 8601 time and milliseconds with three decimals, as Timestamp writes them as text")
    func times() {
        let date = Date(timeIntervalSince1970: 1_800_000_001.2345)
        var expected = "<" + Timestamp.iso8601(date)
        for duration in [Duration.zero, .microseconds(1_234_567), .milliseconds(42), .seconds(3_600), .microseconds(-1_500)] {
            expected += Timestamp.milliseconds(duration)
        }
        let text = written(Timestamp.iso8601Length + 5 * Timestamp.millisecondsLength) { cursor in
            Timestamp.appendISO8601(date, to: &cursor)
            for duration in [Duration.zero, .microseconds(1_234_567), .milliseconds(42), .seconds(3_600), .microseconds(-1_500)] {
                Timestamp.appendMilliseconds(duration, to: &cursor)
            }
        }
        #expect(text == expected)
    }
}
