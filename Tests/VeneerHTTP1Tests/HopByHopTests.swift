import HTTPTypes
import Testing
import VeneerHTTP1

@Suite("Hop-by-hop headers")
struct HopByHopTests {
    @Test("removes the RFC 9110 fields, those named in Connection, and Content-Length")
    func strip() {
        var fields: HTTPFields = [
            .connection: "keep-alive, X-Secret-Hop", .init("Keep-Alive")!: "timeout=5", .te: "trailers",
            .transferEncoding: "chunked", .upgrade: "h2c", .init("X-Secret-Hop")!: "1", .init("Proxy-Authorization")!: "Basic x",
            .contentLength: "3", .accept: "application/json", .authorization: "Bearer t",
        ]
        HopByHop.strip(&fields)
        #expect(fields.map(\.name.canonicalName) == ["accept", "authorization"])
    }

    @Test("leaves end-to-end fields alone")
    func keeps() {
        var fields: HTTPFields = [.accept: "*/*", .init("X-Request-Id")!: "abc"]
        let before = fields
        HopByHop.strip(&fields)
        #expect(fields == before)
    }
}
