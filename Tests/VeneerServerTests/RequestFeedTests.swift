import Foundation
import NIOCore
import Synchronization
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

    @Test("a watch counts while it is held (requests then note every decorator's entry) and ends when released")
    func watch() {
        let feed = RequestFeed(capacity: 2)
        #expect(feed.watches == 0 && feed.lastSequence == 0)
        var watch: RequestFeed.Watch? = feed.watch()
        #expect(feed.watches == 1 && watch != nil)
        add(feed, "/posts/1")
        #expect(feed.lastSequence == 1)
        watch = nil
        #expect(feed.watches == 0)
    }

    @Test("while watched, an item is rendered once for every stream that sends it")
    func renderedOnce() {
        let feed = RequestFeed(capacity: 4)
        let watch = feed.watch()
        add(feed, "/posts/1")
        let renders = Mutex(0)
        let render = { (item: RequestFeed.Item) -> ByteBuffer in
            renders.withLock { $0 += 1 }
            return ByteBuffer(string: item.target)
        }
        let first = feed.recent()[0].rendered(render), second = feed.recent()[0].rendered(render)
        #expect(first == ByteBuffer(string: "/posts/1") && second == first)
        #expect(renders.withLock { $0 } == 1)
        withExtendedLifetime(watch) {}
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
