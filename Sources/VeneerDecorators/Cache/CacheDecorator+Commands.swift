import Foundation
import VeneerConfig
import VeneerCore

extension CacheDecorator {
    /// `veneer purge PATH` / `--all`: removes what the environment's caches store for a path
    /// (or everything), through the running instance (`DELETE /-/cache`), or, when none
    /// answers, straight in the caches' stores.
    static let purgeCommand = CommandLineAction(
        name: "purge",
        abstract: "Remove cached responses for a path (or all of them), through the running instance or in the cache's store.",
        discussion: """
            PATH is a path of the environment's resources: /posts/1 (every query and every caller's copy of it), \
            /posts (every list), /posts?userId=1 (that query alone). Exit status: 0 done (also when nothing was \
            cached); 1 the environment has no cache; 64 a PATH that is not a path of the environment; 78 a \
            configuration error.
            """,
        operand: .init("path", help: "The path whose cached responses go, e.g. /posts/1.", all: "Remove every cached response."),
        perform: { (context: any CommandLineContext, caches: [CacheOptions]) in try await purge(context, caches: caches) })

    /// What `veneer purge` does with the environment's `caches`.
    static func purge(_ context: any CommandLineContext, caches: [CacheOptions]) async throws -> CommandLineOutcome {
        let spec = context.spec
        var prefix = ""
        if let path = context.operand {
            guard let found = keyPrefix(forPath: path, resources: spec.resources) else {
                let known = spec.resources.map { "/\($0.name), /\($0.name)/{id}" }.joined(separator: ", ")
                return .usage("\(path) is not a path of environment \(spec.name) (\(known))")
            }
            prefix = found
        }
        let what = context.operand ?? "every cached response"
        func purged(_ count: Int, via: String) -> CommandLineOutcome {
            count == 0 ? .done("nothing was cached for \(what) (\(via))") : .done("purged \(what): \(count) stored key\(count == 1 ? "" : "s") (\(via))")
        }
        if let answer = await context.askInstance(.delete, "cache", query: context.operand.map { [("path", $0)] } ?? [], timeout: .seconds(30)),
           answer.status == 200, let memory = answer.body?["removed_from_memory"]?.intValue, let store = answer.body?["removed_from_store"]?.intValue {
            return purged(max(memory, store), via: "the running instance at \(answer.address)")
        }
        // No instance, or it went (or switched away) meanwhile: the stores.
        var removed = 0
        var persistent = false
        for name in Set(caches.compactMap(\.store)).sorted() {
            if let count = try await context.withStore(named: name, { try await $0.delete(storeNamespace, prefix: prefix) }) {
                persistent = true
                removed += count
            }
        }
        guard persistent else {
            return .done("nothing to purge: \(await context.instanceMissing()), and environment \(spec.name) "
                + "keeps its cache in memory: it ended with its process")
        }
        return purged(removed, via: "the store")
    }
}
