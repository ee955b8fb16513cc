import HTTPTypes
import NIOCore
import NIOEmbedded
import NIOHTTP1
import VeneerHTTP1

/// The same bytes to Veneer's request parser and to SwiftNIO's `HTTPRequestDecoder`
/// (llhttp): every request Veneer accepts, NIO must accept too, with the same method,
/// target, version, fields and body. Veneer may refuse more, never less, except for the
/// divergences on ``AllowedDivergence``, which RFC 9110/9112 allow.
public enum RequestDifferentialFuzz {
    /// Where Veneer and NIO may differ, and why the RFCs allow it.
    public enum AllowedDivergence: String, CaseIterable, Sendable {
        /// NIO refuses a method it does not know.
        case extensionMethod
        /// NIO refuses a Content-Length given more than once with the same value.
        case repeatedContentLength
        /// NIO stops reading HTTP after an upgrade or a CONNECT.
        case upgradeEndsHTTP
        /// NIO refuses bytes after a request that ends the connection.
        case afterConnectionEnds
        /// NIO reads a `Connection` list that is not a single bare option as ending the connection; Veneer does not.
        case connectionListPersistence

        /// Why the difference is allowed.
        public var reason: String {
            switch self {
            case .extensionMethod:
                return "llhttp knows a fixed list of methods and refuses any other; RFC 9110 §9.1 makes the method an "
                    + "extensible token, and Veneer forwards methods it does not know to the upstream, which decides."
            case .connectionListPersistence:
                return "a Connection field that is a list with empty elements, tabs or elements that are not tokens "
                    + "(`k k,,, Keep-Alive<TAB>`): Veneer reads each element trimmed of whitespace (RFC 9110 §5.6.1, "
                    + "§7.6.1) and honours keep-alive (RFC 9112 §9.3); NIO's matcher misses it, ends the connection and "
                    + "refuses further bytes. Persistence is not framing: each request's length comes from its own fields."
            case .repeatedContentLength:
                return "RFC 9110 §8.6 lets a recipient take a Content-Length repeated with the same decimal value (as "
                    + "lines or as a list) as that one value, or refuse it; NIO refuses, Veneer takes the value (and "
                    + "refuses different values)."
            case .upgradeEndsHTTP:
                return "after a request with Upgrade (or a CONNECT) NIO hands the rest of the stream to the new protocol "
                    + "(RFC 9110 §7.8, §9.3.6); Veneer removes Upgrade as hop-by-hop and never tunnels, so it reads the "
                    + "next bytes as the next request. Requests after that one are not compared."
            case .afterConnectionEnds:
                return "after a request that ends the connection (Connection: close, or HTTP/1.0 without keep-alive) NIO "
                    + "refuses any further bytes; Veneer's parser reads on, but the connection answers that request and "
                    + "closes without processing what follows (RFC 9112 §9.6). Requests after it are not compared."
            }
        }
    }

    /// The methods of RFC 9110 §9 and RFC 5789, which NIO must know.
    static let standardMethods: Set<String> = ["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"]

    /// A request as NIO read it.
    struct NIORequest {
        var head: HTTPRequestHead
        var body: [UInt8] = []
        var complete = false
    }

    /// Every request part NIO makes of `bytes`, and its error if it refused.
    static func nio(_ bytes: UnsafeRawBufferPointer) -> (requests: [NIORequest], error: (any Error)?) {
        let channel = EmbeddedChannel()
        defer { _ = try? channel.finish() }
        var error: (any Error)?
        do {
            try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes)))
            try channel.writeInbound(ByteBuffer(bytes: bytes))
        } catch let thrown {
            error = thrown
        }
        var requests: [NIORequest] = []
        while let part = try? channel.readInbound(as: HTTPServerRequestPart.self) {
            switch part {
            case .head(let head):
                requests.append(NIORequest(head: head))
            case .body(let body):
                requests[requests.count - 1].body += body.readableBytesView
            case .end:
                requests[requests.count - 1].complete = true
            }
        }
        return (requests, error)
    }

    /// The requests Veneer accepts, in order, until it refuses or stops.
    static func veneer(_ bytes: UnsafeRawBufferPointer) -> [(HTTP1RequestParser.Head, [UInt8])] {
        var parser = HTTP1RequestParser(maxHeadSize: 8192, maxFields: 100, bodyLimit: 8192)
        parser.append(ByteBuffer(bytes: bytes))
        var requests: [(HTTP1RequestParser.Head, [UInt8])] = []
        while true {
            do {
                switch try parser.next() {
                case nil, .tooLarge, .overBudget, .bodyStreams, .bodyPart, .bodyEnd:
                    // (No body streams here: the parser has no `streamsBody`.)
                    return requests
                case .waitingForBody:
                    continue
                case .request(let head, let body):
                    requests.append((head, Array(body.readableBytesView)))
                }
            } catch {
                return requests
            }
        }
    }

    /// The target's body.
    public static func run(_ bytes: UnsafeRawBufferPointer) throws(FuzzFinding) {
        let accepted = veneer(bytes)
        guard !accepted.isEmpty else { return }
        let (nioRequests, nioError) = nio(bytes)
        for (index, (head, body)) in accepted.enumerated() {
            guard index < nioRequests.count, nioRequests[index].complete else {
                if index == nioRequests.count, let refusal = nioError as? HTTPParserError, allowed(refusal, of: head) != nil {
                    return
                }
                if index > 0, index == nioRequests.count, case .closedConnection? = nioError as? HTTPParserError,
                   nioRequests[index - 1].head.headers["connection"].contains(where: isNotBareOption) {
                    return  // AllowedDivergence.connectionListPersistence
                }
                throw FuzzFinding("Veneer accepted request \(index + 1) (\(head.method) \(head.target)) that NIO "
                    + (index < nioRequests.count ? "did not finish" : "refused: \(nioError.map { "\($0)" } ?? "no error, no request")"))
            }
            let other = nioRequests[index]
            try compare(head, body, with: other, index: index)
            if other.head.method == .CONNECT || other.head.headers.contains(name: "upgrade") {
                return  // AllowedDivergence.upgradeEndsHTTP
            }
            if !head.keepAlive {
                return  // AllowedDivergence.afterConnectionEnds
            }
        }
    }

    /// The allowed divergence that explains NIO's refusal of a head Veneer accepted, if one does.
    static func allowed(_ refusal: HTTPParserError, of head: HTTP1RequestParser.Head) -> AllowedDivergence? {
        switch refusal {
        case .invalidMethod where !standardMethods.contains(head.method.rawValue):
            return .extensionMethod
        case .invalidContentLength, .unexpectedContentLength:
            let values = head.fields[values: .contentLength].flatMap { $0.split(separator: ",") }.map { Int(trimmed(String($0))) }
            return values.count > 1 && Set(values).count == 1 ? .repeatedContentLength : nil
        default:
            return nil
        }
    }

    static func compare(_ head: HTTP1RequestParser.Head, _ body: [UInt8], with other: NIORequest, index: Int) throws(FuzzFinding) {
        func differ(_ what: String, _ ours: Any, _ theirs: Any) -> FuzzFinding {
            FuzzFinding("request \(index + 1): the \(what) differs: Veneer \(String(reflecting: ours)), NIO \(String(reflecting: theirs))")
        }
        if head.method.rawValue != other.head.method.rawValue { throw differ("method", head.method.rawValue, other.head.method.rawValue) }
        if other.head.version.major != 1 || head.minorVersion != other.head.version.minor {
            throw differ("version", "1.\(head.minorVersion)", "\(other.head.version)")
        }
        let uri = other.head.uri
        let hostFields = other.head.headers["host"]
        if uri.hasPrefix("/") || head.target == uri {
            if head.target != uri { throw differ("target", head.target, uri) }
            if head.authority != hostFields.first.map(trimmed) { throw differ("Host", head.authority as Any, hostFields) }
        } else {
            // Absolute form: Veneer keeps the authority and the path ("/" when there is none).
            guard let authority = head.authority, let scheme = uri.firstIndex(of: ":"),
                  uri[scheme...].hasPrefix("://"), ["http", "https"].contains(uri[..<scheme].lowercased()) else { throw differ("target", head.target, uri) }
            let rest = uri[uri.index(scheme, offsetBy: 3)...]
            let path = rest.dropFirst(authority.count)
            guard rest.hasPrefix(authority), head.target == path || head.target == "/" + path else {
                throw differ("target", "\(authority) \(head.target)", uri)
            }
        }
        let ours = head.fields.map { "\($0.name.canonicalName): \($0.value)" }
        let theirs = other.head.headers.filter { $0.name.lowercased() != "host" }.map { field in
            "\(field.name.lowercased()): \(HTTPField(name: HTTPField.Name(field.name) ?? .xFuzzInvalid, value: trimmed(field.value)).value)"
        }
        if ours != theirs { throw differ("fields", ours, theirs) }
        if body != other.body { throw differ("body", String(decoding: body, as: UTF8.self), String(decoding: other.body, as: UTF8.self)) }
    }

    /// Whether a `Connection` value is more than one bare option: a list, whitespace, a byte outside tokens.
    static func isNotBareOption(_ value: String) -> Bool {
        let tchars = Set("!#$%&'*+-.^_`|~".utf8)
        return !value.utf8.allSatisfy { byte in
            (byte | 0x20 >= UInt8(ascii: "a") && byte | 0x20 <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
                || tchars.contains(byte)
        }
    }

    static func trimmed(_ value: String) -> String {
        var scalars = Substring(value).unicodeScalars
        while let first = scalars.first, first == " " || first == "\t" { scalars.removeFirst() }
        while let last = scalars.last, last == " " || last == "\t" { scalars.removeLast() }
        return String(scalars)
    }
}

extension HTTPField.Name {
    /// Stands in for a name NIO accepted that is not a token (then the fields differ anyway).
    static let xFuzzInvalid = HTTPField.Name("X-Fuzz-Invalid-Name")!
}
