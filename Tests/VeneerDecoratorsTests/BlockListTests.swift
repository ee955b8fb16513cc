import Foundation
import HTTPTypes
import NIOCore
import Prometheus
import Synchronization
import Testing
import VeneerConfig
import VeneerCore
@testable import VeneerDecorators
import VeneerStores
import VeneerTestSupport

/// Decodes block_list options from YAML through the registry's factory.
func blockListOptions(_ yaml: String) throws -> BlockListOptions {
    var registry = Registry()
    registry.register(BlockListDecorator.factory)
    registry.register(OriginFactory(name: "none", summary: "", options: [], decode: { _ in true }, make: { _, _ in RecordingHandler() }))
    let document = try ConfigDocument(source: ConfigSource(file: "t.yaml", text: "environments: {development: {origin: {none: {}}, chain: [{block_list: \(yaml)}]}}"))
    let spec = try document.environment("development", registry: registry, variables: [:], workingDirectory: "/tmp")
    return try #require(spec.chain.first?.options as? BlockListOptions)
}

func blockList(_ yaml: String, inner: RecordingHandler, clock: any VeneerClock = ManualClock(), store: any KeyValueStore = MemoryStore()) async throws -> BlockListDecorator {
    let options = try blockListOptions(yaml)
    var registry = Registry()
    registry.register(BlockListDecorator.factory)
    let context = BuildContext(logger: quietLogger(), clock: clock, metrics: PrometheusMetricsFactory(registry: PrometheusCollectorRegistry()),
                               transports: TransportProviderStub(), stateDirectory: "/tmp", stores: SingleStore(store: store))
    return try #require(try await BlockListDecorator.factory.make(options: options, inner: inner, context: context) as? BlockListDecorator)
}

struct SingleStore: StoreProvider {
    let store: any KeyValueStore
    func store(named name: String) async throws -> any KeyValueStore { store }
}

struct TransportProviderStub: TransportProvider {
    func transport(_ options: TransportOptions) -> any HTTPTransport { fatalError("block_list makes no outbound requests") }
}

func request(_ method: HTTPRequest.Method = .get, _ route: ResourceRoute = .item(.posts, "1"), client: String = "192.0.2.10",
             headers: HTTPFields = [:]) -> ProxyRequest {
    ProxyRequest(method: method, route: route, headers: headers, client: ClientAddress(client))
}

@Suite("block_list")
struct BlockListTests {
    struct Case: Sendable, CustomTestStringConvertible {
        let rules: String
        let request: ProxyRequest
        let allowed: Bool
        var testDescription: String { "\(rules) \(request.method.rawValue) \(request.route) from \(request.client!)" }
    }

    static let account = HTTPField.Name("X-Account-Id")!

    /// `X-Account-Id` once per value.
    static func accounts(_ values: String...) -> HTTPFields {
        HTTPFields(values.map { HTTPField(name: account, value: $0) })
    }

    static let cases: [Case] = [
        // A header rule matches any element of any field: lists, repeats, spaces, empty elements, case.
        Case(rules: "{deny: {headers: {X-Account-Id: ['666']}}}", request: request(headers: accounts("666, 1")), allowed: false),
        Case(rules: "{deny: {headers: {X-Account-Id: ['666']}}}", request: request(headers: accounts("1,666")), allowed: false),
        Case(rules: "{deny: {headers: {X-Account-Id: ['666']}}}", request: request(headers: accounts("1", "666")), allowed: false),
        Case(rules: "{deny: {headers: {X-Account-Id: ['666']}}}", request: request(headers: accounts(",, \t666\t ,")), allowed: false),
        Case(rules: "{deny: {headers: {X-Account-Id: [acct-a]}}}", request: request(headers: accounts("ACCT-A")), allowed: false),
        Case(rules: "{deny: {headers: {X-Account-Id: ['666']}}}", request: request(headers: accounts("6666, 66")), allowed: true),
        Case(rules: "{allow: {headers: {X-Account-Id: ['1']}}}", request: request(headers: accounts("1, 2")), allowed: false),
        Case(rules: "{allow: {headers: {X-Account-Id: ['1']}}}", request: request(headers: accounts("1", "2")), allowed: false),
        Case(rules: "{allow: {headers: {X-Account-Id: ['1']}}}", request: request(headers: accounts(" 1 ")), allowed: true),
        Case(rules: "{allow: {headers: {X-Account-Id: ['1']}}}", request: request(headers: accounts(", ,")), allowed: false),
        Case(rules: "{deny: {clients: [10.0.0.0/8]}}", request: request(client: "10.20.30.40"), allowed: false),
        Case(rules: "{deny: {clients: [10.0.0.0/8]}}", request: request(client: "11.0.0.1"), allowed: true),
        Case(rules: "{deny: {clients: [10.0.0.0/8]}}", request: request(client: "::ffff:10.0.0.9"), allowed: false),
        Case(rules: "{deny: {clients: ['2001:db8::/32']}}", request: request(client: "2001:db8:1::5"), allowed: false),
        Case(rules: "{deny: {clients: ['2001:db8::/32']}}", request: request(client: "2001:db9::5"), allowed: true),
        Case(rules: "{deny: {clients: [192.0.2.10]}}", request: request(client: "192.0.2.10"), allowed: false),
        Case(rules: "{deny: {headers: {X-Account-Id: [acct-13, acct-14]}}}", request: request(headers: [HTTPField.Name("X-Account-Id")!: "acct-14"]), allowed: false),
        Case(rules: "{deny: {headers: {X-Account-Id: [acct-13]}}}", request: request(headers: [HTTPField.Name("X-Account-Id")!: "acct-1"]), allowed: true),
        Case(rules: "{deny: {methods: [DELETE]}}", request: request(.delete), allowed: false),
        Case(rules: "{deny: {methods: [DELETE]}}", request: request(.put), allowed: true),
        Case(rules: "{deny: {routes: [/posts/13]}}", request: request(.get, .item(.posts, "13")), allowed: false),
        Case(rules: "{deny: {routes: [/posts/13]}}", request: request(.get, .item(.posts, "14")), allowed: true),
        Case(rules: "{deny: {routes: ['/posts/{id}']}}", request: request(.get, .item(.posts, "2")), allowed: false),
        Case(rules: "{deny: {routes: ['/posts/{id}']}}", request: request(.get, .list(.posts)), allowed: true),
        Case(rules: "{deny: {routes: [/posts]}}", request: request(.post, .list(.posts)), allowed: false),
        Case(rules: "{allow: {clients: [127.0.0.0/8, '::1']}}", request: request(client: "127.0.0.1"), allowed: true),
        Case(rules: "{allow: {clients: [127.0.0.0/8, '::1']}}", request: request(client: "::1"), allowed: true),
        Case(rules: "{allow: {clients: [127.0.0.0/8]}}", request: request(client: "192.0.2.1"), allowed: false),
        Case(rules: "{allow: {clients: [127.0.0.1], methods: [GET]}}", request: request(.post, .list(.posts), client: "127.0.0.1"), allowed: false),
        Case(rules: "{allow: {clients: [127.0.0.1], methods: [GET]}}", request: request(.get, client: "127.0.0.1"), allowed: true),
        Case(rules: "{allow: {methods: [GET]}, deny: {routes: [/posts/1]}}", request: request(.get), allowed: false),
        Case(rules: "{}", request: request(), allowed: true),
    ]

    @Test("static rules: deny wins; every kind an allow list names must match; no upstream call when refused", arguments: cases)
    func rules(_ testCase: Case) async throws {
        let inner = RecordingHandler()
        let decorator = try await blockList(testCase.rules, inner: inner)
        if testCase.allowed {
            _ = try await decorator.handle(testCase.request)
            #expect(inner.count == 1)
        } else {
            await #expect(throws: ProxyError.self) {
                do {
                    _ = try await decorator.handle(testCase.request)
                } catch let error as ProxyError {
                    #expect(error.code == .clientBlocked && error.status == .forbidden)
                    throw error
                }
            }
            #expect(inner.count == 0)
        }
    }

    @Test("CIDRs keep only their network bits")
    func cidr() throws {
        #expect(try #require(CIDR("10.1.2.3/8")).description == "10.0.0.0/8")
        #expect(try #require(CIDR("2001:db8:ffff::1/33")).description == "2001:db8:8000::/33")
        for bad in ["10.0.0.0/33", "10.0.0/8", "::1/129", "x", "10.0.0.0/-1", "10.0.0.0/"] { #expect(CIDR(bad) == nil, "\(bad)") }
    }

    @Test("malformed rules are configuration errors with line and column")
    func malformed() {
        let yaml = """
            environments:
              development:
                origin: { mock: {} }
                chain:
                  - block_list:
                      deny: { clients: [10.0.0.0/33], methods: [FETCH], routes: [posts] }
                      learn: { json: { error: account_blocked } }
            """
        do {
            let document = try ConfigDocument(source: ConfigSource(file: "v.yaml", text: yaml))
            _ = try document.environment("development", registry: Registry(decorators: [BlockListDecorator.factory], origins: [OriginFactory(name: "mock", summary: "", options: [], decode: { _ in true }, make: { _, _ in RecordingHandler() })]), variables: [:], workingDirectory: "/")
            Issue.record("expected errors")
        } catch {
            #expect(error.diagnostics.map(\.description) == [
                #"v.yaml:6:29: environments.development.chain[0].block_list.deny.clients[0]: "10.0.0.0/33" is not an IP address or CIDR (e.g. 10.0.0.0/8, 2001:db8::/32)"#,
                #"v.yaml:6:53: environments.development.chain[0].block_list.deny.methods[0]: "FETCH" is not a method of the posts API (GET, HEAD, POST, PUT, PATCH, DELETE)"#,
                #"v.yaml:6:70: environments.development.chain[0].block_list.deny.routes[0]: "posts" is not a route (/posts, /posts/{id} or /posts/13)"#,
                "v.yaml:7:18: environments.development.chain[0].block_list.learn.status: required: the status of the upstream's blocked answer",
            ])
        }
    }

    @Test("a rules file: one rule per line, errors with the file's own line and column")
    func rulesFile() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try """
            # blocked networks
            deny client 10.0.0.0/8
            deny header X-Account-Id acct-13   # a noisy tenant
            allow method GET
            """.write(toFile: directory + "/rules.txt", atomically: true, encoding: .utf8)
        let options = try blockListOptions("{rules_file: \(directory)/rules.txt}")
        #expect(options.deny.clients.map(\.description) == ["10.0.0.0/8"])
        #expect(options.deny.headers == ["x-account-id": ["acct-13"]])
        #expect(options.allow.methods == ["GET"])
        try "deny clint 10.0.0.1\nallow method FETCH\nblock route /posts\n".write(toFile: directory + "/bad.txt", atomically: true, encoding: .utf8)
        #expect(throws: ConfigError.self) { try blockListOptions("{rules_file: \(directory)/bad.txt}") }
        do {
            _ = try blockListOptions("{rules_file: \(directory)/bad.txt}")
        } catch let error as ConfigError {
            #expect(error.diagnostics.map(\.description) == [
                "\(directory)/bad.txt:1:6: unknown rule kind 'clint' (did you mean 'client'?)",
                "\(directory)/bad.txt:2:14: \"FETCH\" is not a method of the posts API",
                "\(directory)/bad.txt:3:1: a rule starts with 'deny' or 'allow'",
            ])
        }
    }

    @Test("a learned block answers 403 account_blocked at once, for that account only, until it expires")
    func learned() async throws {
        let clock = ManualClock()
        let inner = RecordingHandler { request in
            request.headers[HTTPField.Name("X-Account-Id")!] == "acct-13"
                ? .json(.forbidden, ByteBuffer(string: #"{"error":"account_blocked"}"#)) : .json(.ok, ByteBuffer(string: "{}"))
        }
        let decorator = try await blockList("{learn: {status: 403, json: {error: account_blocked}, account_header: X-Account-Id, block_for: 1h}}",
                                            inner: inner, clock: clock)
        let blocked: HTTPFields = [HTTPField.Name("X-Account-Id")!: "acct-13"]
        let signal = try await decorator.handle(request(headers: blocked))
        #expect(signal.status == .forbidden, "the upstream's own answer is passed on")
        for _ in 0..<5 {
            await #expect(throws: ProxyError(.accountBlocked, "The account is blocked by the upstream; an operator can lift the block (veneer unblock).")) {
                _ = try await decorator.handle(request(headers: blocked))
            }
        }
        #expect(inner.count == 1)
        _ = try await decorator.handle(request(headers: [HTTPField.Name("X-Account-Id")!: "acct-2"]))
        #expect(inner.count == 2)
        clock.advance(by: .seconds(3601))
        _ = try await decorator.handle(request(headers: blocked))
        #expect(inner.count == 3, "the block expired")
    }

    @Test("a learned block holds for a request that names the account among others, in a list or a second field; several named, none is learned")
    func learnedInLists() async throws {
        let inner = RecordingHandler { request in
            RuleSet.elements(of: Self.account, in: request).contains("acct-13")
                ? .json(.forbidden, ByteBuffer(string: #"{"error":"account_blocked"}"#)) : .json(.ok, ByteBuffer(string: "{}"))
        }
        let decorator = try await blockList("{learn: {status: 403, json: {error: account_blocked}, account_header: X-Account-Id}}", inner: inner)
        // Naming two accounts, the signal says nothing of which: neither is learned.
        _ = try await decorator.handle(request(headers: Self.accounts("acct-2, acct-13")))
        _ = try await decorator.handle(request(headers: Self.accounts("acct-2")))
        #expect(inner.count == 2)
        _ = try await decorator.handle(request(headers: Self.accounts("acct-13")))
        #expect(inner.count == 3)
        for fields in [Self.accounts("acct-13"), Self.accounts("1, acct-13"), Self.accounts("acct-13,1"), Self.accounts("1", "acct-13"),
                       Self.accounts(" acct-13 ,")] {
            await #expect(throws: ProxyError.self, "\(fields)") { _ = try await decorator.handle(request(headers: fields)) }
        }
        #expect(inner.count == 3, "no refused request reached the upstream")
    }

    @Test("the signal must match status, JSON fields and header; without account_header the account is Veneer's own")
    func signal() async throws {
        let inner = RecordingHandler { request in
            switch request.route.id {
            case "1": return .json(.forbidden, ByteBuffer(string: #"{"error":"forbidden"}"#))
            case "2": return ProxyResponse(status: .forbidden, headers: [HTTPField.Name("X-Blocked")!: "no"], body: ByteBuffer(string: #"{"error":"account_blocked"}"#))
            default: return ProxyResponse(status: .forbidden, headers: [HTTPField.Name("X-Blocked")!: "yes"], body: ByteBuffer(string: #"{"error":"account_blocked"}"#))
            }
        }
        let decorator = try await blockList("{learn: {status: 403, json: {error: account_blocked}, header: {X-Blocked: 'yes'}}}", inner: inner)
        _ = try await decorator.handle(request(.get, .item(.posts, "1")))
        _ = try await decorator.handle(request(.get, .item(.posts, "2")))
        #expect(inner.count == 2, "neither answer was the full signal")
        _ = try await decorator.handle(request(.get, .item(.posts, "3")))
        await #expect(throws: ProxyError.self) { _ = try await decorator.handle(request(.get, .list(.posts))) }
        #expect(inner.count == 3)
    }

    @Test("learned blocks are kept in the store and listed and lifted through /-/blocks")
    func storeAndAdmin() async throws {
        let store = MemoryStore()
        let inner = RecordingHandler { _ in .json(.forbidden, ByteBuffer(string: #"{"error":"account_blocked"}"#)) }
        let decorator = try await blockList("{learn: {status: 403}}", inner: inner, store: store)
        _ = try await decorator.handle(request())
        #expect(try await store.list(BlockBook.namespace, now: Date()).map(\.key) == ["veneer"])
        let list = await BlockListDecorator.admin(AdminRequest(method: .get, rest: ""), book: decorator.book)
        #expect(String(buffer: list.body).contains(#""account":"veneer""#))
        let lifted = await BlockListDecorator.admin(AdminRequest(method: .delete, rest: "veneer"), book: decorator.book)
        #expect(lifted.status == .ok)
        #expect(try await store.list(BlockBook.namespace, now: Date()).isEmpty)
        #expect(await BlockListDecorator.admin(AdminRequest(method: .delete, rest: "veneer"), book: decorator.book).status == .notFound)
        _ = try await decorator.handle(request())
        #expect(inner.count == 2, "requests reach the upstream again")
    }

    @Test("an account that is a credential (account_header: X-Api-Key, a Bearer value) is listed and logged as a fingerprint, which unblocks it")
    func credentialAccounts() async throws {
        let store = MemoryStore()
        let inner = RecordingHandler { _ in .json(.forbidden, ByteBuffer(string: #"{"error":"account_blocked"}"#)) }
        let decorator = try await blockList("{learn: {status: 403, account_header: X-Api-Key}}", inner: inner, store: store)
        _ = try await decorator.handle(request(headers: [HTTPField.Name("X-Api-Key")!: "SECRET-KEY-1"]))
        func listed(_ book: BlockBook) async throws -> [String] {
            let body = await BlockListDecorator.admin(AdminRequest(method: .get, rest: ""), book: book).body
            let blocks = try #require(try JSONSerialization.jsonObject(with: Data(buffer: body)) as? [[String: Any]])
            return blocks.compactMap { $0["account"] as? String }
        }
        let shown = try #require(try await listed(decorator.book).first)
        #expect(shown.hasPrefix("<redacted:") && !shown.contains("SECRET"), "\(shown)")
        // What the status page's button sends: the fingerprint, percent-encoded.
        let encoded = shown.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? shown
        #expect(await BlockListDecorator.admin(AdminRequest(method: .delete, rest: encoded), book: decorator.book).status == .ok)
        #expect(try await store.list(BlockBook.namespace, now: Date()).isEmpty)

        let bearer = try await blockList("{learn: {status: 403, account_header: X-Caller}}", inner: inner, store: MemoryStore())
        _ = try await bearer.handle(request(headers: [HTTPField.Name("X-Caller")!: "Bearer SECRET-0123456789"]))
        #expect(try await listed(bearer.book).first?.hasPrefix("<redacted:") == true)
        // A plain account id stays readable.
        let plain = try await blockList("{learn: {status: 403, account_header: X-Account-Id}}", inner: inner, store: MemoryStore())
        _ = try await plain.handle(request(headers: [HTTPField.Name("X-Account-Id")!: "acct-13"]))
        #expect(try await listed(plain.book) == ["acct-13"])
    }
    @Test("a block learned just before a read of the store, whose write the read missed, is not lost when the read's answer comes (it was, for up to a second: a loaded run let the account through)")
    func learnedDuringARead() async throws {
        let store = GatedStore()
        let clock = ManualClock()
        let inner = RecordingHandler { _ in .json(.forbidden, ByteBuffer(string: #"{"error":"account_blocked"}"#)) }
        let decorator = try await blockList("{learn: {status: 403}}", inner: inner, clock: clock, store: store)
        store.puts.hold()
        let learning = Task { try await decorator.handle(request()) }
        await store.puts.waiting.wait()
        // The read begins after the block was learned here, and finds the store without it.
        clock.advance(by: .milliseconds(5))
        await decorator.book.refresh()
        #expect(decorator.book.block(of: "veneer") != nil, "the block learned here holds while its write is under way")
        store.puts.release()
        #expect(try await learning.value.status == .forbidden)
        await decorator.book.refresh()
        #expect(decorator.book.block(of: "veneer") != nil)
        await #expect(throws: ProxyError.self) { _ = try await decorator.handle(request()) }
        #expect(inner.count == 1)
    }

    @Test("a block lifted here while the store is being read is not brought back by that read's answer")
    func liftedDuringARead() async throws {
        let store = GatedStore()
        let inner = RecordingHandler { _ in .json(.forbidden, ByteBuffer(string: #"{"error":"account_blocked"}"#)) }
        let decorator = try await blockList("{learn: {status: 403}}", inner: inner, store: store)
        _ = try await decorator.handle(request())
        #expect(decorator.book.block(of: "veneer") != nil)
        store.lists.hold()
        let reading = Task { await decorator.book.refresh() }
        await store.lists.waiting.wait()  // it has read the store, with the block
        #expect(await decorator.book.unblock("veneer"))
        store.lists.release()
        await reading.value
        #expect(decorator.book.block(of: "veneer") == nil, "the read began before the lift: its answer does not undo it")
        await decorator.book.refresh()
        #expect(decorator.book.block(of: "veneer") == nil)
    }

    @Test("a block the store could not save holds here, and is saved once the store takes writes again; so is a lift")
    func failedWritesAreRetried() async throws {
        let store = GatedStore()
        let inner = RecordingHandler { _ in .json(.forbidden, ByteBuffer(string: #"{"error":"account_blocked"}"#)) }
        let decorator = try await blockList("{learn: {status: 403}}", inner: inner, store: store)
        store.failing.withLock { $0 = true }
        _ = try await decorator.handle(request())
        await decorator.book.refresh()
        #expect(decorator.book.block(of: "veneer") != nil, "the store does not have it, but a read does not undo it")
        await decorator.book.retryFailedWrites()
        #expect(try await store.list(BlockBook.namespace, now: Date()).isEmpty, "still down")
        store.failing.withLock { $0 = false }
        await decorator.book.retryFailedWrites()
        #expect(try await store.list(BlockBook.namespace, now: Date()).map(\.key) == ["veneer"], "saved once the store is back")
        await decorator.book.refresh()
        #expect(decorator.book.block(of: "veneer") != nil)

        store.failing.withLock { $0 = true }
        #expect(await decorator.book.unblock("veneer"))
        await decorator.book.refresh()
        #expect(decorator.book.block(of: "veneer") == nil, "the lift holds here while the store keeps the block")
        store.failing.withLock { $0 = false }
        await decorator.book.retryFailedWrites()
        #expect(try await store.list(BlockBook.namespace, now: Date()).isEmpty, "the lift reaches the store once it is back")
        await decorator.book.refresh()
        #expect(decorator.book.block(of: "veneer") == nil)
    }
}

/// A memory store whose writes (`puts`) wait before they are made, and whose reads of a
/// namespace (`lists`) wait after reading, while the test holds them.
final class GatedStore: KeyValueStore {
    /// One kind of operation held: `waiting` opens when one waits, `release()` lets all go
    /// (once: a gate is held and released one time).
    final class Gate: Sendable {
        private let held = Mutex(false)
        private let released = Latch()
        let waiting = Latch()
        func hold() { held.withLock { $0 = true } }
        func release() {
            held.withLock { $0 = false }
            released.open()
        }
        func pass() async {
            guard held.withLock({ $0 }) else { return }
            waiting.open()
            await released.wait()
        }
    }

    let inner = MemoryStore()
    let puts = Gate()
    let lists = Gate()
    /// While true, writes (puts and deletes) fail, as with a store that is down.
    let failing = Mutex(false)
    struct Down: Error {}
    var description: String { "gated memory" }

    func get(_ namespace: String, _ key: String, now: Date) async throws -> StoredValue? { try await inner.get(namespace, key, now: now) }
    func put(_ namespace: String, _ key: String, _ value: StoredValue, durable: Bool) async throws {
        await puts.pass()
        if failing.withLock({ $0 }) { throw Down() }
        try await inner.put(namespace, key, value, durable: durable)
    }
    func delete(_ namespace: String, _ key: String) async throws -> Bool {
        if failing.withLock({ $0 }) { throw Down() }
        return try await inner.delete(namespace, key)
    }
    func delete(_ namespace: String, prefix: String) async throws -> Int { try await inner.delete(namespace, prefix: prefix) }
    func list(_ namespace: String, now: Date) async throws -> [(key: String, value: StoredValue)] {
        let read = try await inner.list(namespace, now: now)
        await lists.pass()
        return read
    }
    func purge(expiredBefore date: Date) async throws -> Int { try await inner.purge(expiredBefore: date) }
    func trim(_ namespace: String, maxEntries: Int, maxBytes: Int) async throws -> Int { try await inner.trim(namespace, maxEntries: maxEntries, maxBytes: maxBytes) }
    func close() async {}
    func changes(_ namespace: String) -> AsyncStream<StoreChange>? { nil }
    func withLock<T: Sendable>(_ name: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await inner.withLock(name, body)
    }
}
