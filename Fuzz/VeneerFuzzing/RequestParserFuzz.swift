import HTTPTypes
import NIOCore
import VeneerHTTP1

/// The HTTP/1.1 request parser on any bytes: it never crashes or hangs, reads the same
/// requests (and the same refusal) whether the bytes come at once or one at a time, and
/// what it accepts keeps its promises (no `Host` among the fields, a body within the limit).
///
/// The limits are small so that 4 KiB inputs reach them.
public enum RequestParserFuzz {
    static let maxHeadSize = 1024
    static let maxFields = 16
    static let bodyLimit = 256

    /// One request as the parser gave it, comparable.
    struct Request: Equatable, CustomStringConvertible {
        var method: String
        var target: String
        var minorVersion: Int
        var authority: String?
        var fields: [String]
        var keepAlive: Bool
        var expectsContinue: Bool
        /// nil for a request over the body limit.
        var body: [UInt8]?

        init(_ head: HTTP1RequestParser.Head, body: ByteBuffer?) {
            method = head.method.rawValue
            target = head.target
            minorVersion = head.minorVersion
            authority = head.authority
            fields = head.fields.map { "\($0.name.rawName): \($0.value)" }
            keepAlive = head.keepAlive
            expectsContinue = head.expectsContinue
            self.body = body.map { Array($0.readableBytesView) }
        }

        var description: String {
            "\(method) \(target) HTTP/1.\(minorVersion) authority=\(authority ?? "nil") fields=\(fields) body=\(body.map { "\($0.count) bytes" } ?? "too large")"
        }
    }

    /// What a whole input made: the requests in order, then how it ended.
    struct Outcome: Equatable {
        var requests: [Request] = []
        /// The refusal, if the parser refused (its kind: messages may name a different first problem).
        var refusal: HTTP1ParseError.Kind?
    }

    /// Feeds `bytes` in pieces of `step` bytes (0: all at once).
    static func parse(_ bytes: UnsafeRawBufferPointer, step: Int) -> Outcome {
        var parser = HTTP1RequestParser(maxHeadSize: maxHeadSize, maxFields: maxFields, bodyLimit: bodyLimit)
        var outcome = Outcome()
        let size = step == 0 ? max(bytes.count, 1) : step
        var offset = 0
        while offset < bytes.count {
            parser.append(ByteBuffer(bytes: UnsafeRawBufferPointer(rebasing: bytes[offset..<min(offset + size, bytes.count)])))
            offset += size
            do {
                while let event = try parser.next() {
                    switch event {
                    case .waitingForBody:
                        // Depends on where the pieces break: not part of the comparison.
                        continue
                    case .request(let head, let body):
                        outcome.requests.append(Request(head, body: body))
                    case .tooLarge(let head), .overBudget(let head):
                        outcome.requests.append(Request(head, body: nil))
                    case .bodyStreams, .bodyPart, .bodyEnd:
                        // Never: the parser has no `streamsBody` here.
                        continue
                    }
                }
            } catch {
                outcome.refusal = error.kind
                return outcome
            }
        }
        return outcome
    }

    /// The target's body.
    public static func run(_ bytes: UnsafeRawBufferPointer) throws(FuzzFinding) {
        let whole = parse(bytes, step: 0)
        let byByte = parse(bytes, step: 1)
        // A refusal for the size of the head may come as soon as the limit is passed, before
        // a malformed byte further on: only whether it refused must agree.
        guard whole.requests == byByte.requests, (whole.refusal == nil) == (byByte.refusal == nil) else {
            throw FuzzFinding("""
                the bytes read at once and one at a time differ:
                at once: \(whole.requests) refusal=\(String(describing: whole.refusal))
                by byte: \(byByte.requests) refusal=\(String(describing: byByte.refusal))
                """)
        }
        for request in whole.requests {
            if request.fields.contains(where: { $0.lowercased().hasPrefix("host:") }) {
                throw FuzzFinding("Host stayed among the fields: \(request)")
            }
            if let body = request.body, body.count > bodyLimit {
                throw FuzzFinding("a body over the limit was accepted: \(request)")
            }
            if request.target.isEmpty || request.target.utf8.contains(where: { $0 <= 0x20 || $0 >= 0x7F }) {
                throw FuzzFinding("the target is empty or not visible ASCII: \(request)")
            }
        }
    }
}
