import Testing
import VeneerCore

@Suite("Request records")
struct RequestRecordTests {
    @Test("one entry per decorator that acted: the cache's status, the origin's time over every exchange, then the others in order")
    func entries() {
        let record = RequestRecord()
        #expect(record.entries.isEmpty && record.cacheStatus == nil && record.originTime == nil)
        record.append(RequestRecord.Entry(name: "auth_refresh", detail: "token refreshed", duration: .milliseconds(3)))
        record.noteOriginTime(.milliseconds(5))
        record.noteCacheStatus("veneer; fwd=uri-miss")
        record.noteOriginTime(.milliseconds(2))
        record.noteCacheStatus("veneer; fwd=uri-miss; stored")
        record.append(RequestRecord.Entry(name: "block_list", detail: "learned"))
        #expect(record.cacheStatus == "veneer; fwd=uri-miss; stored" && record.originTime == .milliseconds(7))
        #expect(record.entries == [
            RequestRecord.Entry(name: "cache", detail: "veneer; fwd=uri-miss; stored"),
            RequestRecord.Entry(name: "origin", detail: "2 exchanges", duration: .milliseconds(7)),
            RequestRecord.Entry(name: "auth_refresh", detail: "token refreshed", duration: .milliseconds(3)),
            RequestRecord.Entry(name: "block_list", detail: "learned"),
        ])
    }

    @Test("copies of a request share its record")
    func shared() {
        let request = ProxyRequest(method: .get, route: .item(.posts, "1"))
        var copy = request
        copy.method = .head
        copy.record.noteCacheStatus("veneer; hit")
        #expect(request.record.cacheStatus == "veneer; hit")
    }
}
