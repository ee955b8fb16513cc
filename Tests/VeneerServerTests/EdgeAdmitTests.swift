import HTTPTypes
import NIOCore
import Testing
import VeneerCore
@testable import VeneerServer
import VeneerTestSupport

/// Step 1 of the edge: the request id, the lease, the target read with the generation's
/// routes, and the Host and Origin checks. No sockets: an edge over a chain built by hand.
@Suite("The edge, step 1: admit")
struct EdgeAdmitTests {
    /// What admit made of a request, as values to compare.
    enum Outcome: Equatable {
        case admitted(requestID: String, target: RequestTarget, corsOrigin: String?, leasesHeld: Int)
        case refused(status: HTTPResponse.Status, code: String?, requestID: String?)
    }

    let chain = FixedChain([RecordingHandler()], resources: [.posts],
                           access: EdgeAccess(listenHost: "127.0.0.1", allowedHosts: ["veneer.test"], allowedOrigins: ["http://localhost:3000"]))

    func admit(_ target: String = "/posts/1", method: HTTPRequest.Method = .get, fields: HTTPFields = [:], host: String? = "127.0.0.1:8080",
               requestID: String? = nil, adminOnly: Bool = false) -> Outcome {
        let edge = ProxyEdge(chain: chain, admin: NoAdmin(), logger: quietLogger(), adminOnly: adminOnly, servesAdmin: true)
        switch edge.admit(method: method, target: target, fields: fields, authority: host, localPort: 8080, requestID: requestID) {
        case .admitted(let admitted):
            return .admitted(requestID: admitted.requestID, target: admitted.target, corsOrigin: admitted.corsOrigin,
                             leasesHeld: admitted.lease.chain.requestsInFlight)
        case .refused(let response):
            let code = String(buffer: response.body).split(separator: "\"").dropFirst(3).first.map(String.init)
            return .refused(status: response.status, code: code, requestID: response.headers[.xRequestID])
        }
    }

    @Test("the request id: the one the connection already gave, else the client's when reasonable, else a new one")
    func requestID() throws {
        #expect(admit(fields: [.xRequestID: "theirs"], requestID: "the-connection's")
                == .admitted(requestID: "the-connection's", target: .route(.item(.posts, "1"), query: nil), corsOrigin: nil, leasesHeld: 1))
        #expect(admit(fields: [.xRequestID: "theirs"]) == .admitted(requestID: "theirs", target: .route(.item(.posts, "1"), query: nil),
                                                                   corsOrigin: nil, leasesHeld: 1))
        guard case .admitted(let generated, _, _, _) = admit(fields: [.xRequestID: String(repeating: "a", count: 300)]) else {
            throw CancellationError()
        }
        #expect(generated.count == RequestID.length)
    }

    @Test("an admitted request holds a lease on the generation it entered until it is let go; a refused one holds none")
    func lease() {
        let edge = ProxyEdge.serving(chain)
        switch edge.admit(method: .get, target: "/posts/1", fields: [:], authority: nil, localPort: 8080, requestID: nil) {
        case .admitted(let admitted):
            #expect(admitted.lease.chain === chain.current && chain.current.requestsInFlight == 1)
        case .refused:
            Issue.record("refused")
        }
        #expect(chain.current.requestsInFlight == 0, "the lease ended with the admitted request")
        switch edge.admit(method: .get, target: "/posts/1", fields: [:], authority: "rebind.attacker.example", localPort: 8080, requestID: nil) {
        case .admitted:
            Issue.record("admitted")
        case .refused(let response):
            #expect(response.status == .misdirectedRequest && chain.current.requestsInFlight == 0)
        }
    }

    @Test("the target is read with the routes of the generation it entered; the separate admin listener has none")
    func target() {
        guard case .admitted(_, .notFound, _, _) = admit("/comments/1") else {
            Issue.record("a collection the generation does not expose was a route")
            return
        }
        guard case .admitted(_, .admin(path: "health", query: "x=1"), _, _) = admit("/-/health?x=1") else {
            Issue.record("the admin API was not read as such")
            return
        }
        guard case .admitted(_, .notFound, _, _) = admit("/posts/1", adminOnly: true) else {
            Issue.record("the admin listener read a route of the posts API")
            return
        }
    }

    @Test("Host and Origin: 421 for a Host it does not answer for, 403 for another site's page, the preflight of an allowed origin answered, its answers readable",
          arguments: [
              ("/posts/1", HTTPRequest.Method.get, [HTTPField(name: .xRequestID, value: "r1")], "rebind.attacker.example:8080" as String?,
               Outcome.refused(status: .misdirectedRequest, code: "misdirected_request", requestID: "r1")),
              ("/posts/1", .post, [HTTPField(name: .xRequestID, value: "r2"), HTTPField(name: .origin, value: "http://evil.example")], "127.0.0.1:8080",
               .refused(status: .forbidden, code: "cross_site_refused", requestID: "r2")),
              ("/posts/1", .options, [HTTPField(name: .xRequestID, value: "r3"), HTTPField(name: .origin, value: "http://localhost:3000"),
                                      HTTPField(name: .accessControlRequestMethod, value: "DELETE")], "veneer.test",
               .refused(status: .noContent, code: nil, requestID: "r3")),
              ("/posts/1", .get, [HTTPField(name: .xRequestID, value: "r4"), HTTPField(name: .origin, value: "http://localhost:3000")], "veneer.test",
               .admitted(requestID: "r4", target: .route(.item(.posts, "1"), query: nil), corsOrigin: "http://localhost:3000", leasesHeld: 1)),
              // allowed_origins never opens the admin API.
              ("/-/health", .get, [HTTPField(name: .xRequestID, value: "r5"), HTTPField(name: .origin, value: "http://localhost:3000")], "veneer.test",
               .refused(status: .forbidden, code: "cross_site_refused", requestID: "r5")),
              ("/-/health", .get, [HTTPField(name: .xRequestID, value: "r6")], nil,
               .admitted(requestID: "r6", target: .admin(path: "health", query: nil), corsOrigin: nil, leasesHeld: 1)),
          ])
    func access(_ target: String, _ method: HTTPRequest.Method, _ fields: [HTTPField], _ host: String?, _ expected: Outcome) {
        #expect(admit(target, method: method, fields: HTTPFields(fields), host: host) == expected)
        #expect(chain.current.requestsInFlight == 0)
    }

    @Test("the separate admin listener applies the admin API's rules to every request")
    func adminListener() {
        #expect(admit("/posts/1", fields: [.xRequestID: "r", .origin: "http://localhost:3000"], adminOnly: true)
                == .refused(status: .forbidden, code: "cross_site_refused", requestID: "r"))
    }
}
