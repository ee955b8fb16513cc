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
