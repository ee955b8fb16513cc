import Foundation
import HTTPTypes
import NIOCore
import Testing
import VeneerCore
import VeneerOrigins

@Suite("Mock origin")
struct MockOriginTests {
    let origin = MockOrigin(state: MockOriginState())

    func send(_ method: HTTPRequest.Method, _ route: ResourceRoute, _ body: String = "", query: String? = nil,
              headers: HTTPFields = [:]) async throws -> (HTTPResponse.Status, JSONValue?, ProxyResponse) {
        let response = try await origin.handle(ProxyRequest(method: method, route: route, query: query, headers: headers, body: ByteBuffer(string: body)))
        return (response.status, try? JSONValue.parse(response.body), response)
    }

    @Test("create then get returns the post; ids auto-increment from 1")
    func createThenGet() async throws {
        let (status, created, response) = try await send(.post, .list(.posts), #"{"title":"first","body":"hello","extra":true}"#)
        #expect(status == .created)
        #expect(created?["id"]?.intValue == 1)
        #expect(response.headers[.location] == "/posts/1")
        let (_, second, _) = try await send(.post, .list(.posts), #"{"title":"second","body":"b"}"#)
        #expect(second?["id"]?.intValue == 2)
        let (getStatus, fetched, _) = try await send(.get, .item(.posts, "1"))
        #expect(getStatus == .ok)
        #expect(fetched?.text == #"{"id":1,"title":"first","body":"hello","extra":true}"#)
        let (_, list, _) = try await send(.get, .list(.posts))
        guard case .array(let items)? = list else { Issue.record("not a list"); return }
        #expect(items.map { $0["id"]?.intValue } == [1, 2])
    }

    @Test("PUT replaces, PATCH merges, DELETE removes; unknown ids are 404")
    func updateAndDelete() async throws {
        _ = try await send(.post, .list(.posts), #"{"title":"t","body":"b","tag":"x"}"#)
        let (putStatus, put, _) = try await send(.put, .item(.posts, "1"), #"{"title":"T","body":"B"}"#)
        #expect(putStatus == .ok && put?.text == #"{"id":1,"title":"T","body":"B"}"#)
        let (_, patched, _) = try await send(.patch, .item(.posts, "1"), #"{"body":"patched"}"#)
        #expect(patched?.text == #"{"id":1,"title":"T","body":"patched"}"#)
        let (deleteStatus, _, _) = try await send(.delete, .item(.posts, "1"))
        #expect(deleteStatus == .noContent)
        let (missing, error, _) = try await send(.get, .item(.posts, "1"))
        #expect(missing == .notFound && error?["error"]?.stringValue == "not_found")
        #expect(try await send(.put, .item(.posts, "9"), #"{"title":"t","body":"b"}"#).0 == .notFound)
        #expect(try await send(.delete, .item(.posts, "9")).0 == .notFound)
    }

    @Test("invalid posts are refused with 400 bad_request")
    func validation() async throws {
        await #expect(throws: ProxyError.self) { try await self.send(.post, .list(.posts), #"{"title":"no body"}"#) }
        await #expect(throws: ProxyError.self) { try await self.send(.post, .list(.posts), "not json") }
        #expect(try await send(.get, .list(.posts)).1 == .array([]))
    }

    @Test("a seed sets the first items, and new ids continue after the highest")
    func seed() async throws {
        let seeded = MockOrigin(state: MockOriginState(seed: ["posts": [
            try JSONValue.parse(#"{"id":7,"title":"seven","body":"s"}"#), try JSONValue.parse(#"{"id":3,"title":"three","body":"t"}"#),
        ]]))
        let created = try await seeded.handle(ProxyRequest(method: .post, route: .list(.posts), body: ByteBuffer(string: #"{"title":"n","body":"b"}"#)))
        #expect(try JSONValue.parse(created.body)["id"]?.intValue == 8)
        let three = try await seeded.handle(.getPost(3))
        #expect(try JSONValue.parse(three.body)["title"]?.stringValue == "three")
    }

    @Test("ETags change on update and If-None-Match answers 304")
    func etags() async throws {
        _ = try await send(.post, .list(.posts), #"{"title":"t","body":"b"}"#)
        let (_, _, first) = try await send(.get, .item(.posts, "1"))
        let tag = try #require(first.headers[.eTag])
        #expect(try await send(.get, .item(.posts, "1"), headers: [.ifNoneMatch: tag]).0 == .notModified)
        _ = try await send(.patch, .item(.posts, "1"), #"{"title":"u"}"#)
        let (status, _, after) = try await send(.get, .item(.posts, "1"), headers: [.ifNoneMatch: tag])
        #expect(status == .ok && after.headers[.eTag] != tag)
    }

    @Test("list queries filter on fields")
    func filters() async throws {
        _ = try await send(.post, .list(.posts), #"{"title":"a","body":"b","userId":1}"#)
        _ = try await send(.post, .list(.posts), #"{"title":"c","body":"d","userId":2}"#)
        let (_, list, _) = try await send(.get, .list(.posts), query: "userId=2")
        #expect(list?.text == #"[{"id":2,"title":"c","body":"d","userId":2}]"#)
    }

    @Test("other collections: string ids from the body, bodies kept as they are")
    func stringCollections() async throws {
        let comments = Resource(name: "comments", kind: .string)
        let (status, created, _) = try await send(.post, .list(comments), #"{"id":"intro","text":"hi"}"#)
        #expect(status == .created && created?["id"]?.stringValue == "intro")
        #expect(try await send(.post, .list(comments), #"{"id":"intro"}"#).0 == .conflict)
        let (_, generated, _) = try await send(.post, .list(comments), #"{"text":"no id"}"#)
        #expect(generated?["id"]?.stringValue == "1")
        #expect(try await send(.get, .item(comments, "intro")).1?["text"]?.stringValue == "hi")
    }

    @Test("concurrent creates get distinct ids")
    func concurrency() async throws {
        let origin = self.origin
        let ids = try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<200 {
                group.addTask {
                    let response = try await origin.handle(ProxyRequest(method: .post, route: .list(.posts),
                                                                        body: ByteBuffer(string: #"{"title":"\#(index)","body":"b"}"#)))
                    return try JSONValue.parse(response.body)["id"]?.intValue ?? -1
                }
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(Set(ids) == Set(1...200))
    }

    @Test("the built-in sample posts are those of config/fixtures/posts.json")
    func samplePostsMatchFixture() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let data = try Data(contentsOf: root.appendingPathComponent("config/fixtures/posts.json"))
        #expect(try JSONValue.parse(Array(data)) == .array(MockOriginOptions.samplePosts))
    }
}
