import Foundation
import HTTPTypes
import Testing
import VeneerConfig
import VeneerCore
@testable import VeneerDecorators
import VeneerOrigins
import VeneerTestSupport

/// `ttl: heuristic`, `heuristic_max` and `targeted_fields`: what they do (RFC 9111 §4.2.2,
/// RFC 9213) and how they are checked.
@Suite("cache: heuristic freshness and targeted fields, as options (RFC 9111 §4.2.2, RFC 9213)")
struct CacheFreshnessOptionsTests {
    static func heuristic(max: Duration = .seconds(86_400)) -> CacheOptions {
        var options = CacheOptions()
        options.ttl = .heuristic
        options.heuristicMax = max
        return options
    }

    @Test("RFC 9111 §4.2.2: ttl: heuristic makes a response fresh for a tenth of the time since Last-Modified, at most heuristic_max",
          arguments: [(5 * 86_400, 86_400, 43_200), (100 * 86_400, 3600, 3600), (3600, 86_400, 360)])
    func heuristicLifetime(_ sinceModified: Int, _ max: Int, _ fresh: Int) async throws {
        let date = Date()
        try await withCache(Self.heuristic(max: .seconds(max)), start: date, reply: { _ in
            post(1, headers: [("Date", HTTPDate.format(date)), ("Last-Modified", HTTPDate.format(date.addingTimeInterval(-Double(sinceModified))))])
        }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1")
            try await rig.expectFresh("/posts/1", for: fresh)
        }
    }

    @Test("RFC 9111 §4.2.2: with ttl: heuristic and no Last-Modified a response is stored but not fresh: revalidated before use")
    func heuristicWithoutLastModified() async throws {
        try await withCache(Self.heuristic(), reply: { request in
            request.header("if-none-match") == "\"e\"" ? UpstreamReply(status: 304, headers: [("ETag", "\"e\"")], body: "") : post(1, headers: [("ETag", "\"e\"")])
        }) { (rig: CacheRig) async throws in
            #expect(try await rig.get("/posts/1").cacheStatus.hasSuffix("stored"))
            let second = try await rig.get("/posts/1")
            #expect(second.status == .ok && second.cacheStatus == "veneer; fwd=stale; fwd-status=304")
            #expect(rig.upstream.count == 2)
        }
    }

    @Test("RFC 9111 §4.2.2: explicit freshness beats the heuristic; a duration ttl beats Last-Modified")
    func explicitFirst() async throws {
        let date = Date()
        let modified = HTTPDate.format(date.addingTimeInterval(-100 * 86_400))
        try await withCache(Self.heuristic(), start: date, reply: { _ in
            post(1, headers: [("Date", HTTPDate.format(date)), ("Last-Modified", modified), ("Cache-Control", "max-age=5")])
        }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1")
            rig.clock.advance(by: .seconds(6))
            #expect(try await rig.get("/posts/1").cacheStatus.contains("fwd=stale"))
        }
        try await withCache(reply: { _ in post(1, headers: [("Date", HTTPDate.format(date)), ("Last-Modified", modified)]) }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1")
            rig.clock.advance(by: .seconds(61))
            #expect(try await rig.get("/posts/1").cacheStatus.contains("fwd=stale"), "ttl 60s, not 10 days")
        }
    }

    @Test("RFC 9213 §2.2: CDN-Cache-Control applies when listed, in the order listed")
    func cdnListed() async throws {
        var options = CacheOptions()
        options.targetedFields = [.cdnCacheControl, .veneerCacheControl]
        try await withCache(options, reply: { request in
            request.target == "/posts/1"
                ? post(1, headers: [("Cache-Control", "max-age=60"), ("CDN-Cache-Control", "no-store")])
                : post(2, headers: [("Cache-Control", "no-store"), ("Veneer-Cache-Control", "no-store"), ("CDN-Cache-Control", "max-age=60")])
        }) { (rig: CacheRig) async throws in
            let first = try await rig.get("/posts/1")
            #expect(!first.cacheStatus.contains("stored") && first.headers[.cdnCacheControl] == "no-store")
            #expect(try await rig.get("/posts/2").cacheStatus.hasSuffix("stored"), "the first listed field wins")
        }
    }

    @Test("freshness comes from the targeted field, then Cache-Control, then Expires, then ttl", arguments: [
        ([("Veneer-Cache-Control", "max-age=10"), ("Cache-Control", "max-age=100"), ("Expires", "EXPIRES+1000")], 10),
        ([("Cache-Control", "max-age=100"), ("Expires", "EXPIRES+1000")], 100),
        ([("Expires", "EXPIRES+1000")], 1000),
        ([("Veneer-Cache-Control", "public")], 60),
    ] as [([(String, String)], Int)])
    func order(_ headers: [(String, String)], _ seconds: Int) async throws {
        let now = Date()
        let resolved = headers.map { name, value in
            (name, value.replacingOccurrences(of: "EXPIRES+1000", with: HTTPDate.format(now.addingTimeInterval(1000))))
        } + [("Date", HTTPDate.format(now))]
        try await withCache(start: now, reply: { _ in post(1, headers: resolved) }) { (rig: CacheRig) async throws in
            _ = try await rig.get("/posts/1")
            try await rig.expectFresh("/posts/1", for: seconds)
        }
    }

    // MARK: The options as written

    static let registry = Registry(decorators: [CacheDecorator.factory], origins: [MockOrigin.factory])

    static func decode(_ cache: String) throws -> CacheOptions {
        let yaml = "environments: {development: {origin: {mock: {}}, chain: [{cache: \(cache)}]}}"
        let document = try ConfigDocument(source: ConfigSource(file: "veneer.yaml", text: yaml))
        let environment = try document.environment("development", registry: registry, variables: [:], workingDirectory: "/")
        return try #require(environment.chain.first?.options as? CacheOptions)
    }

    static func problems(_ cache: String) -> [String] {
        do {
            _ = try decode(cache)
            return []
        } catch let error as ConfigError {
            return error.diagnostics.map(\.description)
        } catch {
            return ["\(error)"]
        }
    }

    @Test("ttl: heuristic, heuristic_max and targeted_fields decode, with their defaults")
    func decoding() throws {
        let defaults = try Self.decode("{}")
        #expect(defaults.ttl == .duration(.seconds(60)) && defaults.targetedFields == [.veneerCacheControl])
        let heuristic = try Self.decode("{ttl: heuristic, heuristic_max: 2h, targeted_fields: [CDN-Cache-Control, Veneer-Cache-Control]}")
        #expect(heuristic.ttl == .heuristic && heuristic.heuristicMax == .seconds(7200))
        #expect(heuristic.targetedFields == [.cdnCacheControl, .veneerCacheControl])
        #expect(try Self.decode("{ttl: heuristic}").heuristicMax == .seconds(86_400))
        #expect(try Self.decode("{targeted_fields: []}").targetedFields.isEmpty)
    }

    @Test("bad values of the new options are configuration errors with line, column and key path")
    func validation() {
        #expect(Self.problems("{ttl: forever}") == [#"veneer.yaml:1:72: environments.development.chain[0].cache.ttl: "forever" is not a duration (use e.g. 30s, 5m, 1h)"#])
        #expect(Self.problems("{ttl: 5m, heuristic_max: 1h}").first?.hasSuffix("cache.heuristic_max: applies only with ttl: heuristic") == true)
        #expect(Self.problems("{ttl: heuristic, heuristic_max: 0s}").first?.hasSuffix("cache.heuristic_max: 0s is out of range (1s...365d)") == true)
        #expect(Self.problems("{targeted_fields: [Cache-Control]}").first?.contains("cache.targeted_fields[0]: Cache-Control is always obeyed") == true)
        #expect(Self.problems("{targeted_fields: [\"bad name\"]}").first?.hasSuffix(#"targeted_fields[0]: "bad name" is not a field name"#) == true)
        #expect(Self.problems("{targeted_fields: [CDN-Cache-Control, cdn-cache-control]}").first?.contains("is listed twice") == true)
    }

    @Test("veneer decorators lists the new options with their defaults")
    func documented() {
        let options = Dictionary(uniqueKeysWithValues: CacheDecorator.factory.options.map { ($0.name, $0) })
        #expect(options["ttl"]?.type == "duration or heuristic" && options["ttl"]?.defaultValue == "60s")
        #expect(options["heuristic_max"]?.defaultValue == "1d")
        #expect(options["targeted_fields"]?.defaultValue == "[Veneer-Cache-Control]")
    }
}
