import CZlib
import NIOCore
import VeneerCore

/// A body's `Content-Encoding` undone, so that `record` can redact what it holds: gzip and
/// deflate through zlib, within a bound (a small body may inflate to gigabytes).
enum ContentDecoding {
    enum Outcome: Equatable {
        /// No coding: the bytes are the content.
        case identity
        /// The content, decoded.
        case decoded([UInt8])
        /// The content is larger than the bound.
        case tooLarge
        /// A coding Veneer cannot undo, or data that is not what its coding says: the reason.
        case unreadable(String)
    }

    /// The codings a `Content-Encoding` value lists, lower-case, `identity` left out.
    static func codings(_ header: String?) -> [String] {
        guard let header else { return [] }
        return header.split(separator: ",").map { $0.trimmingSpaces.lowercased() }.filter { !$0.isEmpty && $0 != "identity" }
    }

    /// `body` decoded as `contentEncoding` says, at most `limit` bytes of it.
    static func decode(_ body: ByteBuffer, contentEncoding: String?, limit: Int) -> Outcome {
        let codings = codings(contentEncoding)
        guard let coding = codings.first else { return .identity }
        guard codings.count == 1 else { return .unreadable("a body in several codings (\(codings.joined(separator: ", ")))") }
        switch coding {
        case "gzip", "x-gzip":
            return inflate(Array(body.readableBytesView), windowBits: 15 + 16, limit: limit, coding: coding)
        case "deflate":
            // RFC 9110's deflate is zlib's format; some servers send raw deflate data instead.
            let bytes = Array(body.readableBytesView)
            let zlib = inflate(bytes, windowBits: 15, limit: limit, coding: coding)
            if case .unreadable = zlib { return inflate(bytes, windowBits: -15, limit: limit, coding: coding) }
            return zlib
        default:
            return .unreadable("a \(coding)-encoded body")
        }
    }

    /// zlib's inflate over `input`; concatenated gzip members are read one after another.
    static func inflate(_ input: [UInt8], windowBits: Int32, limit: Int, coding: String) -> Outcome {
        if input.isEmpty { return .decoded([]) }
        var stream = z_stream()
        guard inflateInit2_(&stream, windowBits, zlibVersion(), Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            return .unreadable("a \(coding)-encoded body (zlib could not start)")
        }
        defer { inflateEnd(&stream) }
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 << 10)
        var input = input
        return input.withUnsafeMutableBufferPointer { source -> Outcome in
            stream.next_in = source.baseAddress
            stream.avail_in = UInt32(source.count)
            while true {
                let status = chunk.withUnsafeMutableBufferPointer { target -> Int32 in
                    stream.next_out = target.baseAddress
                    stream.avail_out = UInt32(target.count)
                    return CZlib.inflate(&stream, Z_NO_FLUSH)
                }
                let produced = chunk.count - Int(stream.avail_out)
                guard output.count + produced <= limit else { return .tooLarge }
                output.append(contentsOf: chunk[..<produced])
                switch status {
                case Z_STREAM_END:
                    guard stream.avail_in > 0 else { return .decoded(output) }
                    // Another gzip member follows.
                    guard inflateReset(&stream) == Z_OK else { return .unreadable("a \(coding)-encoded body that is not valid \(coding) data") }
                case Z_OK:
                    continue
                case Z_BUF_ERROR where stream.avail_in == 0 && produced == 0:
                    return .unreadable("a truncated \(coding)-encoded body")
                case Z_BUF_ERROR:
                    continue
                default:
                    return .unreadable("a \(coding)-encoded body that is not valid \(coding) data")
                }
            }
        }
    }
}
