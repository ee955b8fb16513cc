import HTTPTypes
import NIOCore
import Testing
import VeneerCore

@Suite("JSON values")
struct JSONValueTests {
    @Test("parses and writes back objects in member order")
    func roundTrip() throws {
        let text = #"{"id":1,"title":"a \"quoted\" \u00e9","body":"x\ny","tags":[true,false,null,1.5e3],"nested":{"z":1,"a":2}}"#
        let value = try JSONValue.parse(text)
        #expect(value["id"]?.intValue == 1)
        #expect(value["title"]?.stringValue == "a \"quoted\" é")
        #expect(value.objectMembers?.map(\.0) == ["id", "title", "body", "tags", "nested"])
        #expect(try JSONValue.parse(value.text) == value)
        #expect(value["nested"]?.objectMembers?.map(\.0) == ["z", "a"])
    }

    @Test("rejects what RFC 8259 does not allow", arguments: [
        "", "{", "{\"a\":}", "[1,]", "01", "1.", "tru", "\"\\x\"", "{\"a\":1} x", "\"\u{01}\"", "\"\\ud800\"", "{'a':1}",
    ])
    func rejects(_ text: String) {
        #expect(throws: JSONParseError.self) { try JSONValue.parse(text) }
    }

    @Test("limits nesting")
    func nesting() {
        let deep = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        #expect(throws: JSONParseError.self) { try JSONValue.parse(deep) }
    }

    @Test("setting replaces in place and appends new members")
    func setting() throws {
        let value = try JSONValue.parse(#"{"a":1,"b":2}"#)
        #expect(value.setting("a", to: .int(9)).text == #"{"a":9,"b":2}"#)
        #expect(value.setting("c", to: .string("x")).text == #"{"a":1,"b":2,"c":"x"}"#)
    }

    @Test("escapes control characters when writing")
    func escaping() {
        #expect(JSONValue.string("a\u{01}\"\\\n").text == #""a\u0001\"\\\n""#)
    }
}

@Suite("Post validation")
struct PostValidationTests {
    func body(_ text: String) -> ByteBuffer { ByteBuffer(string: text) }

    @Test("POST and PUT need title and body strings; extra fields are kept")
    func required() throws {
        let value = try PostValidation.validate(body(#"{"title":"t","body":"b","userId":3}"#), method: .post, id: nil)
        #expect(value["userId"]?.intValue == 3)
        #expect(throws: ProxyError.badRequest("A post needs a \"body\" string.")) {
            try PostValidation.validate(self.body(#"{"title":"t"}"#), method: .put, id: "1")
        }
        #expect(throws: ProxyError.badRequest("The \"title\" of a post must be a string.")) {
            try PostValidation.validate(self.body(#"{"title":5,"body":"b"}"#), method: .post, id: nil)
        }
    }

    @Test("PATCH needs neither field but checks the types of those present")
    func patch() throws {
        _ = try PostValidation.validate(body(#"{"body":"only"}"#), method: .patch, id: "1")
        #expect(throws: ProxyError.self) { try PostValidation.validate(self.body(#"{"body":null}"#), method: .patch, id: "1") }
    }

    @Test("bad JSON, non-objects and mismatched ids are 400", arguments: [
        ("{", "POST"), ("[1]", "POST"), ("", "POST"), (#"{"id":"x","title":"t","body":"b"}"#, "POST"),
        (#"{"id":2,"title":"t","body":"b"}"#, "PUT"),
    ])
    func invalid(_ text: String, _ method: String) {
        #expect(throws: ProxyError.self) {
            try PostValidation.validate(self.body(text), method: .init(method)!, id: method == "PUT" ? "1" : nil)
        }
    }
}
