import Foundation
import Testing
@testable import VeneerDecorators
import VeneerCore
import VeneerTestSupport

@Suite("Cache inspection and purge: /-/cache")
struct CacheAdminTests {
    let yaml = "environments: {development: {origin: {mock: {seed: config/fixtures/posts.json}}, chain: [{cache: {ttl: 30s}}]}}"

    @Test("GET /-/cache?path= shows the stored entry: key, status, age, headers")
    func inspect() async throws {
        let clock = ManualClock()
        try await withVeneer(yaml: yaml, clock: clock, workingDirectory: packageRoot) { (veneer: RunningVeneer) async throws in
            _ = try await veneer.request("GET", "/posts/1")
            _ = try await veneer.request("GET", "/posts?userId=1")
            clock.advance(by: .seconds(12))
            let shown = try await veneer.request("GET", "/-/cache?path=/posts/1")
            #expect(shown.status == 200, "\(shown.text)")
            let entries = try #require(try JSONSerialization.jsonObject(with: Data(shown.text.utf8)) as? [[String: Any]])
            #expect(entries.count == 1)
            #expect(entries.first?["key"] as? String == "I/posts/1  ")
            #expect(entries.first?["status"] as? Int == 200)
            #expect(entries.first?["age"] as? Int == 12 && entries.first?["ttl"] as? Int == 18)
            #expect(entries.first?["tier"] as? String == "memory")
            #expect((entries.first?["headers"] as? [String: Any])?["ETag"] as? String == #""1-1""#)
            let list = try await veneer.request("GET", "/-/cache?path=%2Fposts%3FuserId%3D1")
            #expect(list.status == 200 && list.text.contains(#""key":"L/posts userId=1 ""#), "\(list.text)")
            #expect(try await veneer.request("GET", "/-/cache?path=/posts/2").status == 404)
            #expect(try await veneer.request("GET", "/-/cache?path=/etc/passwd").status == 400)
            #expect(try await veneer.request("GET", "/-/").text.contains(#""/-/cache""#))
        }
    }

    @Test("/-/cache shows no caller's credentials: Vary values, credential headers and sensitive query values are fingerprints that still tell callers apart")
    func credentialsCut() async throws {
        let reply = UpstreamReply.json(#"{"id":1,"title":"t","body":"b"}"#, headers: [
            ("Cache-Control", "public, max-age=60"), ("Vary", "Authorization, Cookie"), ("X-Session-Id", "SECRET-S"),
            ("Link", "<http://up.test/posts/2?access_token=SECRET-L>; rel=next"),
        ])
        try await withTestUpstream({ _ in reply }) { (upstream: TestUpstream) async throws in
            let yaml = "environments: {development: {origin: {upstream: {url: \"\(upstream.url)\"}}, chain: [{cache: {ttl: 30s}}]}}"
            try await withVeneer(yaml: yaml) { (veneer: RunningVeneer) async throws in
                for caller in ["A", "B"] {
                    let answer = try await veneer.request("GET", "/posts/1?access_token=SECRET-Q\(caller)&page=2",
                                                          headers: [("Authorization", "Bearer SECRET-\(caller)-0123456789"), ("Cookie", "sid=SECRET-C\(caller)")])
                    #expect(answer.status == 200)
                }
                let shown = try await veneer.request("GET", "/-/cache?path=/posts/1")
                #expect(shown.status == 200, "\(shown.text)")
                #expect(!shown.text.contains("SECRET"), "\(shown.text)")
                let entries = try #require(try JSONSerialization.jsonObject(with: Data(shown.text.utf8)) as? [[String: Any]])
                #expect(entries.count == 2)
                let keys = entries.compactMap { $0["key"] as? String }
                #expect(keys.allSatisfy { $0.hasPrefix("I/posts/1 access_token=<redacted:") && $0.contains("&page=2 #") }, "\(keys)")
                #expect(Set(keys).count == 2, "the two callers' entries stay apart")
                let authorizations = entries.compactMap { ($0["vary"] as? [String: Any])?["authorization"] as? String }
                #expect(authorizations.count == 2 && authorizations.allSatisfy { $0.hasPrefix("<redacted:") } && Set(authorizations).count == 2,
                        "\(authorizations)")
                let headers = try #require(entries.first?["headers"] as? [String: Any])
                #expect((headers["X-Session-Id"] as? String)?.hasPrefix("<redacted:") == true)
                #expect((headers["Link"] as? String)?.hasPrefix("<http://up.test/posts/2?access_token=<redacted:") == true)
                // The request lists show the path only.
                let status = try await veneer.request("GET", "/-/status")
                #expect(status.text.contains("/posts/1?…") && !status.text.contains("SECRET"))
            }
        }
    }

    @Test("DELETE /-/cache?path= removes a path's entries, DELETE /-/cache all of them; the next GET is a miss")
    func purge() async throws {
        try await withVeneer(yaml: yaml, workingDirectory: packageRoot) { (veneer: RunningVeneer) async throws in
            _ = try await veneer.request("GET", "/posts/1")
            _ = try await veneer.request("GET", "/posts/2")
            #expect(try await veneer.request("GET", "/posts/1").header("Cache-Status")?.hasPrefix("veneer; hit") == true)
            // Meant for another environment's instance: refused, nothing removed.
            #expect(try await veneer.request("DELETE", "/-/cache?path=/posts/1&environment=production").status == 409)
            #expect(try await veneer.request("GET", "/posts/1").header("Cache-Status")?.hasPrefix("veneer; hit") == true)
            let removed = try await veneer.request("DELETE", "/-/cache?path=/posts/1")
            #expect(removed.status == 200 && removed.json?["removed_from_memory"] as? Int == 1, "\(removed.text)")
            #expect(try await veneer.request("GET", "/posts/1").header("Cache-Status")?.contains("fwd=uri-miss") == true)
            #expect(try await veneer.request("GET", "/posts/2").header("Cache-Status")?.hasPrefix("veneer; hit") == true)
            let all = try await veneer.request("DELETE", "/-/cache")
            #expect(all.json?["removed_from_memory"] as? Int == 2)
            #expect(try await veneer.request("GET", "/posts/2").header("Cache-Status")?.contains("fwd=uri-miss") == true)
            #expect(try await veneer.request("POST", "/-/cache").status == 405)
        }
    }

    @Test("a path's key prefix: every query of an item, one query of a list; nothing outside the resources")
    func prefixes() {
        #expect(CacheDecorator.keyPrefix(forPath: "/posts/1", resources: [.posts]) == "I/posts/1 ")
        #expect(CacheDecorator.keyPrefix(forPath: "/posts/01", resources: [.posts]) == nil, "not an id the edge forwards")
        #expect(CacheDecorator.keyPrefix(forPath: "/posts?b=2&a=1", resources: [.posts]) == "L/posts a=1&b=2 ")
        #expect(CacheDecorator.keyPrefix(forPath: "/posts", resources: [.posts]) == "L/posts ")
        #expect(CacheDecorator.keyPrefix(forPath: "/posts/1/x", resources: [.posts]) == nil)
        #expect(CacheDecorator.keyPrefix(forPath: "/comments/1", resources: [.posts]) == nil)
        #expect(CacheDecorator.keyPrefix(forPath: "posts/1", resources: [.posts]) == nil)
    }
}

private let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
