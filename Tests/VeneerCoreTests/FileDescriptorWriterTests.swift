import Foundation
import Testing
import VeneerCore

@Suite("Writing log lines to a descriptor")
struct FileDescriptorWriterTests {
    /// The pieces `writeLines` writes, as strings.
    func pieces(_ text: String, limit: Int) -> [String] {
        let bytes = Array(text.utf8)
        return bytes.withUnsafeBytes { raw in
            var pieces: [String] = []
            var start = 0
            while start < raw.count {
                let end = FileDescriptorWriter.pieceEnd(raw, from: start, limit: limit)
                pieces.append(String(decoding: raw[start..<end], as: UTF8.self))
                start = end
            }
            return pieces
        }
    }

    @Test("a batch of lines is cut at line ends into pieces of at most the limit (PIPE_BUF: atomic in a pipe); a longer line goes alone, whole")
    func cutAtLineEnds() {
        let lines = (0..<50).map { "line \($0) " + String(repeating: "x", count: $0 % 7 * 3) + "\n" }
        let batch = lines.joined()
        let cut = pieces(batch, limit: 64)
        #expect(cut.joined() == batch)
        #expect(cut.count > 1)
        for piece in cut {
            #expect(piece.utf8.count <= 64 && piece.hasSuffix("\n"), "\(piece)")
        }
        let long = String(repeating: "y", count: 100) + "\n"
        #expect(pieces("a\n" + long + "b\n", limit: 64) == ["a\n", long, "b\n"])
        #expect(pieces("short\n", limit: 64) == ["short\n"])
    }

    @Test("through a pipe shared with another writer, every line of a large batch arrives whole")
    func sharedPipe() async throws {
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        let (reader, writer) = (ends[0], ends[1])
        let mine = (0..<2000).map { "veneer line \($0) " + String(repeating: "v", count: 100) + "\n" }.joined()
        let theirs = "other " + String(repeating: "o", count: 200) + "\n"
        let read = Task.detached { () -> String in
            var out: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = buffer.withUnsafeMutableBytes { Glibc.read(reader, $0.baseAddress, $0.count) }
                if count <= 0 { break }
                out += buffer[..<count]
            }
            return String(decoding: out, as: UTF8.self)
        }
        let other = Thread { for _ in 0..<500 { _ = theirs.utf8CString.withUnsafeBytes { FileDescriptorWriter.writeAll(writer, UnsafeRawBufferPointer(rebasing: $0.dropLast())) } } }
        other.start()
        let written = Array(mine.utf8).withUnsafeBytes { FileDescriptorWriter.writeLines(writer, $0) }
        #expect(written == mine.utf8.count)
        while !other.isFinished { try await Task.sleep(for: .milliseconds(5)) }
        close(writer)
        let text = await read.value
        close(reader)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        #expect(lines.count == 2500)
        #expect(lines.allSatisfy { $0.hasPrefix("veneer line ") && $0.hasSuffix(String(repeating: "v", count: 100)) || $0 + "\n" == theirs })
    }
}
