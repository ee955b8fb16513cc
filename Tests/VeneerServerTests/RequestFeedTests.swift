import Foundation
import HTTPTypes
import Testing
import VeneerCore
@testable import VeneerServer

@Suite("the request feed behind the status page")
struct RequestFeedTests {
    func add(_ feed: RequestFeed, _ target: String, status: Int = 200) {
        feed.add(method: .get, target: target, status: status, duration: .milliseconds(3), record: nil)
    }

    @Test("keeps the last `capacity` requests, oldest first, numbered from 1; `after` gives only the newer ones")
    func ring() {
        let feed = RequestFeed(capacity: 3)
        #expect(feed.recent().isEmpty)
        for index in 1...5 { add(feed, "/posts/\(index)") }
        #expect(feed.recent().map(\.target) == ["/posts/3", "/posts/4", "/posts/5"])
        #expect(feed.recent().map(\.sequence) == [3, 4, 5])
        #expect(feed.recent(after: 4).map(\.target) == ["/posts/5"])
        #expect(feed.recent(after: 5).isEmpty)
    }

    @Test("a subscriber gets the backlog after its last id and then every new request, nothing missed or repeated; ending the stream unsubscribes")
    func subscribe() async {
        let feed = RequestFeed(capacity: 10)
        add(feed, "/posts/1")
        add(feed, "/posts/2")
        let (backlog, stream) = feed.subscribe(after: 1)
        #expect(backlog.map(\.sequence) == [2])
        #expect(feed.subscribers == 1)
        add(feed, "/posts/3")
        add(feed, "/posts/4")
        var iterator = stream.makeAsyncIterator()
        #expect(await iterator.next()?.sequence == 3)
        #expect(await iterator.next()?.sequence == 4)
        // The consumer stops (its task is cancelled): the feed forgets it.
        let task = Task { for await _ in stream {} }
        task.cancel()
        await task.value
        for _ in 0..<100 where feed.subscribers != 0 { try? await Task.sleep(for: .milliseconds(10)) }
        #expect(feed.subscribers == 0)
        add(feed, "/posts/5")
    }

    @Test("an item's time is the wall clock of its monotonic instant; its request id is read from its answer's headers")
    func timeAndRequestID() {
        let feed = RequestFeed(capacity: 2)
        let before = Date()
        feed.add(answered: .now(), method: .get, target: "/posts/1", status: 200, duration: .zero, headers: [.xRequestID: "abc-123"], record: nil)
        let item = feed.recent()[0]
        #expect(item.requestID == "abc-123")
        #expect(abs(item.time.timeIntervalSince(before)) < 1)
    }

    @Test("the page shows a path without its query (a query may carry a secret)")
    func pathHidesQuery() {
        let feed = RequestFeed(capacity: 2)
        add(feed, "/posts?access_token=secret")
        add(feed, "/posts/1")
        #expect(feed.recent().map(\.path) == ["/posts?…", "/posts/1"])
        #expect(!String(buffer: feed.recent()[0].json.buffer).contains("secret"))
    }
}
