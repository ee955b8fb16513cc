import VeneerConfig
import VeneerCore

/// The configuration loader on any text: libyaml into the node tree, `${...}` interpolation,
/// `extends`, and the decoding of every environment and store.
///
/// Checks: no crash or hang; escaping every `$` as `$$` and expanding gives the text back;
/// and when `veneer check` (``ConfigDocument/checkAll(registry:variables:workingDirectory:)``)
/// finds no problem, every environment decodes (what `check` passes, `run` starts).
public enum ConfigLoaderFuzz {
    static let variables = ["HOME": "/home/fuzz", "TOKEN": "s3cret", "EMPTY": "", "PORT": "8080", "STATE_DIRECTORY": "/var/lib/veneer"]
    static let workingDirectory = "/fuzz"

    /// Stand-ins for Veneer's origins and decorators, decoding options of the same kinds
    /// (files, durations, stores, secrets) without linking the modules that build them.
    static let registry = Registry(
        decorators: [
            stub("latency_log", ["slow", "label"]) { options in
                _ = options.duration("slow")
                _ = options.string("label")
            },
            stub("cache", ["ttl", "store", "max_entries", "stale_if_error"]) { options in
                _ = options.duration("ttl")
                _ = options.storeReference()
                _ = options.int("max_entries", in: 1...1_000_000)
                _ = options.duration("stale_if_error")
            },
            stub("block_list", ["store", "header", "learn"]) { options in
                _ = options.storeReference()
                _ = options.stringList("header")
                _ = options.mapping("learn", allowedKeys: ["status", "json"])?.int("status", in: 100...599)
            },
            stub("auth_refresh", ["token_url", "client_id", "client_secret", "refresh_token", "store"], secrets: ["client_secret", "refresh_token"]) { options in
                _ = options.string("token_url", required: true)
                _ = options.string("client_id")
                _ = options.secret("client_secret")
                _ = options.secret("refresh_token")
                _ = options.storeReference()
            },
        ],
        origins: [
            OriginFactory(name: "mock", summary: "fuzz stand-in", options: [OptionDoc("seed", "file", "")], decode: { options in
                options.filePath("seed").map { _ in true } ?? false
            }, make: { _, _ in throw FuzzFinding("not built while fuzzing") }),
            OriginFactory(name: "upstream", summary: "fuzz stand-in", options: [OptionDoc("url", "url", ""), OptionDoc("timeout", "duration", "")], decode: { options in
                _ = options.duration("timeout")
                return options.string("url", required: true)
            }, make: { _, _ in throw FuzzFinding("not built while fuzzing") }),
        ]
    )

    static func stub(_ name: String, _ keys: [String], secrets: Set<String> = [], decode: @escaping @Sendable (ConfigMapping) -> Void) -> DecoratorFactory {
        DecoratorFactory(name: name, summary: "fuzz stand-in", options: keys.map { OptionDoc($0, "any", "", secret: secrets.contains($0)) },
                         decode: { options, _ in decode(options); return true },
                         make: { _, _, _ in throw FuzzFinding("not built while fuzzing") })
    }

    /// The target's body.
    public static func run(_ bytes: UnsafeRawBufferPointer) throws(FuzzFinding) {
        let text = String(decoding: bytes, as: UTF8.self)
        let escaped = text.replacing("$", with: "$$")
        guard (try? Interpolation.expand(escaped, variables: variables)) == text else {
            throw FuzzFinding("expanding the text with every '$' escaped did not give the text back")
        }
        _ = try? Interpolation.expand(text, variables: variables)

        let document: ConfigDocument
        do {
            document = try ConfigDocument(source: ConfigSource(file: "fuzz.yaml", text: text))
        } catch {
            return
        }
        let problems = document.checkAll(registry: registry, variables: variables, workingDirectory: workingDirectory)
        for name in document.environmentNames {
            do {
                _ = try document.environment(name, registry: registry, variables: variables, workingDirectory: workingDirectory)
            } catch {
                if problems.isEmpty {
                    throw FuzzFinding("check found no problem, but environment '\(name)' does not decode: \(error)")
                }
            }
        }
    }
}
