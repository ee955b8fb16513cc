import HTTPTypes
import Testing
import VeneerCore

@Suite("resource routes: paths and templates")
struct ResourceRouteTests {
    @Test("a route's path and template are the collection's name after a slash, then the id or {id}, for short and long names")
    func pathsAndTemplates() {
        let long = Resource(name: "a-collection-named-at-length", kind: .string)
        let cases: [(ResourceRoute, path: String, template: String)] = [
            (.list(.posts), "/posts", "/posts"),
            (.item(.posts, "13"), "/posts/13", "/posts/{id}"),
            (.item(.posts, "9223372036854775807"), "/posts/9223372036854775807", "/posts/{id}"),
            (.list(long), "/a-collection-named-at-length", "/a-collection-named-at-length"),
            (.item(long, "x.y~z"), "/a-collection-named-at-length/x.y~z", "/a-collection-named-at-length/{id}"),
            // Pieces copied whole by their UTF-8 bytes: multi-byte text keeps its bytes and length.
            (.item(Resource(name: "café-ünï", kind: .string), "é"), "/café-ünï/é", "/café-ünï/{id}"),
        ]
        for (route, path, template) in cases {
            #expect(route.path == path && route.template == template && route.description == path)
        }
    }
}
