import HTTPTypes
import NIOCore

/// The checks that make `posts` a typed resource: `{id: Int, title: String, body: String}`
/// plus any extra members, which are kept.
public enum PostValidation {
    /// Checks a request body for `method` on a posts route and returns it parsed.
    ///
    /// `POST` and `PUT` need `title` and `body` strings; `PATCH` needs neither, but checks
    /// the type of each one present. An `id`, when present, must be an integer and, on an
    /// item route, the id of the path.
    public static func validate(_ body: ByteBuffer, method: HTTPRequest.Method, id: String?) throws(ProxyError) -> JSONValue {
        let value: JSONValue
        do {
            value = try JSONValue.parse(body)
        } catch {
            throw .badRequest(body.readableBytes == 0 ? "The request needs a JSON body." : "The body is not valid JSON: \(error).")
        }
        guard case .object = value else { throw .badRequest("A post must be a JSON object.") }
        let required = method != .patch
        for field in ["title", "body"] {
            switch value[field] {
            case .string?: continue
            case nil where !required: continue
            case nil: throw .badRequest("A post needs a \"\(field)\" string.")
            default: throw .badRequest("The \"\(field)\" of a post must be a string.")
            }
        }
        if let given = value["id"] {
            guard let number = given.intValue else { throw .badRequest("The \"id\" of a post must be an integer.") }
            if let id, String(number) != id { throw .badRequest("The \"id\" in the body does not match the path.") }
        }
        return value
    }
}
