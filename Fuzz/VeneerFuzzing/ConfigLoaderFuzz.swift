import VeneerConfig
import VeneerCore
import VeneerDecorators

/// The configuration loader on any text: libyaml into the node tree, `${...}` interpolation,
/// `extends`, and the decoding of every environment and store.
///
/// Checks: no crash or hang; escaping every `$` as `$$` and expanding gives the text back;
/// and when `veneer check` (``ConfigDocument/checkAll(registry:variables:workingDirectory:)``)
/// finds no problem, every environment decodes (what `check` passes, `run` starts).
public enum ConfigLoaderFuzz {
    static let variables = ["HOME": "/home/fuzz", "TOKEN": "s3cret", "EMPTY": "", "PORT": "8080", "STATE_DIRECTORY": "/var/lib/veneer"]
    static let workingDirectory = "/fuzz"

    /// Veneer's own decorators, decoding their options as `veneer check` does (every duration,
    /// size, count and percentage through its bounds), and stand-ins for the origins, whose
    /// module the fuzz targets do not link, decoding options of the same kinds.
    static let registry = Registry(
        decorators: [
            LatencyLogDecorator.factory, CacheDecorator.factory, AuthRefreshDecorator.factory, BlockListDecorator.factory,
            FaultDecorator.factory, RecordDecorator.factory,
        ],
        origins: [
            OriginFactory(name: "mock", summary: "fuzz stand-in", options: [OptionDoc("seed", "file", "")], decode: { options in
                options.filePath("seed").map { _ in true } ?? false
            }, make: { _, _ in throw FuzzFinding("not built while fuzzing") }),
            OriginFactory(name: "upstream", summary: "fuzz stand-in", options: [OptionDoc("url", "url", ""), OptionDoc("timeout", "duration", "")], decode: { options in
                _ = options.duration("timeout", in: .init(.milliseconds(1) ... .seconds(3600)))
                return options.string("url", required: true)
            }, make: { _, _ in throw FuzzFinding("not built while fuzzing") }),
        ]
    )

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
