import Foundation
import VeneerConfig
import VeneerCore

/// Options of the `mock` origin, decoded once.
public struct MockOriginOptions: Sendable {
    /// The seed file, if any.
    public var seedFile: String?
    /// Items to start with, per collection name (already parsed and checked).
    public var seed: [String: [JSONValue]]
    /// A delay added to every answer, to play a slow upstream in development.
    public var latency: Duration
    /// Whether it starts with the sample posts built into Veneer (``MockOriginOptions/samplePosts``).
    public var sample = false

    /// Creates options.
    public init(seedFile: String? = nil, seed: [String: [JSONValue]] = [:], latency: Duration = .zero) {
        self.seedFile = seedFile
        self.seed = seed
        self.latency = latency
    }

    static let docs: [OptionDoc] = [
        OptionDoc("seed", "file", "JSON file of posts to start with: a list of posts, or {\"posts\": [...], \"comments\": [...]}"),
        OptionDoc("latency", "duration", default: "0s", "a delay added to every answer"),
        OptionDoc("sample", "boolean", default: "false", "start with the five sample posts built into Veneer (those of config/fixtures/posts.json)"),
    ]

    /// The sample posts, built in so that the binary alone serves them (the built-in
    /// configuration does); `config/fixtures/posts.json` holds the same, which a test checks.
    public static let samplePosts: [JSONValue] = [
        (1, "Hello, Veneer", 1), (2, "Caching in front of a REST API", 2), (3, "Tokens that refresh themselves", 1),
        (4, "Blocked accounts, answered locally", 2), (5, "Measuring latency where it matters", 1),
    ].map { id, title, user in
        .object([("id", .int(id)), ("title", .string(title)), ("body", .string("Sample post \(id) for the development environment.")),
                 ("userId", .int(user))])
    }

    /// Decodes the options; the seed file is read and checked here, so that `veneer check`
    /// reports a broken seed with the line of the `seed` key.
    static func decode(_ mapping: ConfigMapping) -> MockOriginOptions? {
        var options = MockOriginOptions()
        options.latency = mapping.duration("latency", default: .zero, in: .init(.zero ... .seconds(3600))) ?? .zero
        options.sample = mapping.bool("sample", default: false)
        if options.sample {
            if mapping["seed"] != nil { mapping.error("sample", "give either 'seed' or 'sample', not both") }
            options.seed = ["posts": samplePosts]
        }
        if let seedValue = mapping["seed"], let path = mapping.filePath("seed") {
            options.seedFile = path
            do {
                options.seed = try loadSeed(path)
            } catch {
                seedValue.error(error.message)
            }
        }
        return options
    }

    struct SeedError: Error {
        let message: String
    }

    static func loadSeed(_ path: String) throws(SeedError) -> [String: [JSONValue]] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw SeedError(message: "seed file \(path) \(FileManager.default.fileExists(atPath: path) ? "is not readable" : "does not exist")")
        }
        let value: JSONValue
        do {
            value = try JSONValue.parse(Array(data))
        } catch {
            throw SeedError(message: "seed file \(path) is not valid JSON: \(error)")
        }
        var collections: [(String, JSONValue)]
        switch value {
        case .array: collections = [("posts", value)]
        case .object(let members): collections = members
        default: throw SeedError(message: "seed file \(path) must hold a list of posts or an object of collections")
        }
        var seed: [String: [JSONValue]] = [:]
        for (name, items) in collections {
            guard case .array(let list) = items else {
                throw SeedError(message: "seed file \(path): \"\(name)\" must be a list")
            }
            for (index, item) in list.enumerated() {
                guard case .object = item, let id = item["id"] else {
                    throw SeedError(message: "seed file \(path): \(name)[\(index)] must be an object with an \"id\"")
                }
                if name == "posts" {
                    guard id.intValue != nil, item["title"]?.stringValue != nil, item["body"]?.stringValue != nil else {
                        throw SeedError(message: "seed file \(path): posts[\(index)] needs an integer \"id\" and \"title\" and \"body\" strings")
                    }
                }
            }
            seed[name] = list
        }
        return seed
    }
}
