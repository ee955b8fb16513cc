import Foundation
import NIOCore
import Synchronization

/// Debian's `chromium` in headless mode, for tests of the status page in a real browser:
/// `dumpDOM` loads a page and returns its DOM once loaded (`--dump-dom`), `screenshot` takes a
/// picture, and `launch` starts a browser driven through the DevTools protocol (a page that
/// stays open: its script runs, its buttons can be clicked).
public final class HeadlessChromium: Sendable {
    /// Where Debian installs it (`make test` installs it when missing).
    public static let binary = "/usr/bin/chromium"

    static let flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-dev-shm-usage",
                        "--disable-extensions", "--disable-background-networking", "--mute-audio"]

    public enum Failure: Error, CustomStringConvertible {
        case notInstalled
        case noDebuggingPort(String)
        case protocolError(String)
        case timeout(String)

        public var description: String {
            switch self {
            case .notInstalled: return "\(HeadlessChromium.binary) is missing: `make test` installs Debian's chromium (apt-get install chromium)"
            case .noDebuggingPort(let log): return "chromium did not open its DevTools port: \(log)"
            case .protocolError(let text): return "DevTools: \(text)"
            case .timeout(let what): return "timed out waiting for \(what)"
            }
        }
    }

    /// The DOM of `url` once loaded; with `virtualTime`, after its scripts ran that long.
    public static func dumpDOM(_ url: String, virtualTime: Duration? = nil) async throws -> String {
        guard FileManager.default.isExecutableFile(atPath: binary) else { throw Failure.notInstalled }
        let profile = try temporaryDirectory("veneer-chromium")
        defer { try? FileManager.default.removeItem(atPath: profile) }
        var arguments = flags + ["--user-data-dir=\(profile)", "--dump-dom"]
        if let virtualTime { arguments.append("--virtual-time-budget=\(virtualTime.components.seconds * 1000)") }
        let result = try await VeneerProcess.runProgram(binary, arguments + [url])
        return result.stdout
    }

    /// A screenshot of `url` (PNG) at `path`, after its scripts ran for two seconds.
    public static func screenshot(_ url: String, to path: String, width: Int = 1280, height: Int = 860) async throws {
        guard FileManager.default.isExecutableFile(atPath: binary) else { throw Failure.notInstalled }
        let profile = try temporaryDirectory("veneer-chromium")
        defer { try? FileManager.default.removeItem(atPath: profile) }
        _ = try await VeneerProcess.runProgram(binary, flags + ["--user-data-dir=\(profile)", "--hide-scrollbars", "--window-size=\(width),\(height)",
                                                                "--virtual-time-budget=2000", "--screenshot=\(path)", url])
    }

    let process: ChildProcess
    let profile: String
    /// The DevTools port.
    public let port: Int

    private init(process: ChildProcess, profile: String, port: Int) {
        self.process = process
        self.profile = profile
        self.port = port
    }

    /// Starts a browser with a DevTools port of its own (port 0: it picks one and writes it
    /// to `DevToolsActivePort` in its profile).
    public static func launch() async throws -> HeadlessChromium {
        guard FileManager.default.isExecutableFile(atPath: binary) else { throw Failure.notInstalled }
        let profile = try temporaryDirectory("veneer-chromium")
        let process = try ChildProcess(binary, flags + ["--user-data-dir=\(profile)", "--remote-debugging-port=0", "about:blank"])
        var port: Int?
        _ = try await poll(timeout: .seconds(60)) {
            port = (try? String(contentsOfFile: profile + "/DevToolsActivePort", encoding: .utf8))
                .flatMap { $0.split(separator: "\n").first.flatMap { Int($0) } }
            return port != nil || !process.isRunning
        }
        if let port { return HeadlessChromium(process: process, profile: profile, port: port) }
        process.signal(SIGKILL)
        throw Failure.noDebuggingPort("no DevToolsActivePort in \(profile)")
    }

    /// The browser's open page (`about:blank` at launch), driven through the DevTools protocol.
    public func page() async throws -> DevToolsPage {
        var path: String?
        let found = try await poll(timeout: eventuallyTimeout) {
            // Its HTTP server keeps the connection open whatever the request says: read one answer.
            let connection = try await RawConnection.connect(port: port)
            defer { connection.close() }
            try await connection.send("GET /json/list HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n")
            guard let list = try await connection.responses(1).first else { throw Failure.protocolError("no answer to /json/list") }
            if let targets = try? JSONSerialization.jsonObject(with: Data(list.body)) as? [[String: Any]],
               let page = targets.first(where: { $0["type"] as? String == "page" }),
               let socket = page["webSocketDebuggerUrl"] as? String {
                path = URL(string: socket)?.path
            }
            return path != nil
        }
        guard found, let path else { throw Failure.timeout("a page target") }
        return try await DevToolsPage.connect(port: port, path: path)
    }

    /// Runs `body` with the open page of a browser launched for it, then ends the browser.
    public static func withPage<T>(_ body: (DevToolsPage) async throws -> T) async throws -> T {
        let browser = try await launch()
        defer { browser.stop() }
        let page = try await browser.page()
        defer { page.close() }
        return try await body(page)
    }

    /// Ends the browser and removes its profile.
    public func stop() {
        // The browser and its helper processes: the process group it leads.
        kill(-process.pid, SIGKILL)
        process.waitBlocking()
        try? FileManager.default.removeItem(atPath: profile)
    }
}

/// One page of a ``HeadlessChromium``, over the DevTools protocol's WebSocket (a client
/// just big enough for it: masked text frames out, whole or fragmented frames in).
public final class DevToolsPage: Sendable {
    private let connection: RawConnection
    /// Where the frames begin in what the connection received (after the upgrade's head).
    private let framesStart: Int
    private struct State {
        var nextID = 1
        /// How far the frames were read.
        var consumed = 0
        var messages: [[String: Any]] = []
    }
    private let state = Mutex(State())

    private init(connection: RawConnection, framesStart: Int) {
        self.connection = connection
        self.framesStart = framesStart
        state.withLock { $0.consumed = framesStart }
    }

    static func connect(port: Int, path: String) async throws -> DevToolsPage {
        let connection = try await RawConnection.connect(port: port)
        try await connection.send("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        let head = try await connection.wait(timeout: .seconds(10)) { bytes, _ in
            bytes.count >= 4 && (0...(bytes.count - 4)).contains { bytes[$0] == 13 && bytes[$0 + 1] == 10 && bytes[$0 + 2] == 13 && bytes[$0 + 3] == 10 }
        }
        let end = (0...(head.count - 4)).first { head[$0] == 13 && head[$0 + 1] == 10 && head[$0 + 2] == 13 && head[$0 + 3] == 10 }! + 4
        guard String(decoding: head[..<end], as: UTF8.self).hasPrefix("HTTP/1.1 101") else {
            throw HeadlessChromium.Failure.protocolError("no WebSocket upgrade: \(String(decoding: head, as: UTF8.self))")
        }
        return DevToolsPage(connection: connection, framesStart: end)
    }

    /// Calls a DevTools method and returns its `result`.
    @discardableResult
    public func call(_ method: String, _ parameters: [String: Any] = [:], timeout: Duration = eventuallyTimeout) async throws -> [String: Any] {
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        let message = try JSONSerialization.data(withJSONObject: ["id": id, "method": method, "params": parameters])
        try await connection.send(Self.frame(Array(message)))
        var reply: [String: Any]?
        let answered = try await poll(timeout: timeout) {
            readFrames()
            reply = state.withLock { state in state.messages.first { $0["id"] as? Int == id } }
            return reply != nil
        }
        guard answered, let reply else { throw HeadlessChromium.Failure.timeout("\(method)") }
        if let error = reply["error"] { throw HeadlessChromium.Failure.protocolError("\(method): \(error)") }
        return reply["result"] as? [String: Any] ?? [:]
    }

    /// The value of a JavaScript expression in the page (promises awaited).
    @discardableResult
    public func evaluate(_ expression: String) async throws -> Any? {
        let result = try await call("Runtime.evaluate", ["expression": expression, "returnByValue": true, "awaitPromise": true])
        if let exception = result["exceptionDetails"] { throw HeadlessChromium.Failure.protocolError("\(expression): \(exception)") }
        return (result["result"] as? [String: Any])?["value"]
    }

    /// Waits until `expression` is true in the page (a navigation in between is fine).
    public func waitUntil(_ expression: String, timeout: Duration = eventuallyTimeout) async throws {
        guard try await !poll(timeout: timeout, { (try? await evaluate(expression)) as? Bool == true }) else { return }
        // Where the page was, to tell what went wrong.
        let state = (try? await evaluate("location.href + ' ' + (document.body ? document.body.innerText.slice(0, 300) : '')")) as? String
        throw HeadlessChromium.Failure.timeout("\(expression) (page: \(state ?? "?"))")
    }

    /// Loads `url` and waits until its document is complete.
    public func navigate(_ url: String) async throws {
        try await call("Page.navigate", ["url": url])
        try await waitUntil("document.readyState === 'complete' && location.href === \(Self.quoted(url))")
    }

    /// Closes the connection.
    public func close() { connection.close() }

    static func quoted(_ text: String) -> String {
        String(decoding: try! JSONSerialization.data(withJSONObject: [text]), as: UTF8.self).dropFirst().dropLast().description
    }

    /// A masked text frame.
    static func frame(_ payload: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = [0x81]
        switch payload.count {
        case ..<126: bytes.append(0x80 | UInt8(payload.count))
        case ..<65536: bytes += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        default: bytes += [0x80 | 127] + (0..<8).reversed().map { UInt8((payload.count >> ($0 * 8)) & 0xFF) }
        }
        let mask: [UInt8] = (0..<4).map { _ in UInt8.random(in: 0...255) }
        bytes += mask
        bytes += payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
        return bytes
    }

    /// Parses the whole frames received since the last call into messages.
    private func readFrames() {
        let bytes = connection.received
        state.withLock { state in
            var offset = state.consumed
            var fragments: [UInt8] = []
            var messageStart = offset
            while offset + 2 <= bytes.count {
                let first = bytes[offset], second = bytes[offset + 1]
                var length = Int(second & 0x7F)
                var header = 2
                if length == 126 {
                    guard offset + 4 <= bytes.count else { break }
                    length = Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3])
                    header = 4
                } else if length == 127 {
                    guard offset + 10 <= bytes.count else { break }
                    length = (2..<10).reduce(0) { $0 << 8 | Int(bytes[offset + $1]) }
                    header = 10
                }
                guard offset + header + length <= bytes.count else { break }
                fragments += bytes[(offset + header)..<(offset + header + length)]
                offset += header + length
                guard first & 0x80 != 0 else { continue }  // more fragments follow
                if first & 0x0F == 0x1 || first & 0x0F == 0x0,
                   let message = try? JSONSerialization.jsonObject(with: Data(fragments)) as? [String: Any] {
                    state.messages.append(message)
                }
                fragments = []
                messageStart = offset
            }
            state.consumed = messageStart
        }
    }
}
