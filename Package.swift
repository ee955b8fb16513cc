// swift-tools-version: 6.1
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    // Nonisolated async functions run on their caller's executor (SE-0461): a request's chain
    // of async calls then costs no executor check, and no hop, per call.
    .enableUpcomingFeature("NonisolatedNonsendingByDefault"),
]

// Tests import what they use from transitive dependencies without re-declaring each one.
let testSettings: [SwiftSetting] = [.enableUpcomingFeature("ExistentialAny"), .enableUpcomingFeature("NonisolatedNonsendingByDefault")]

let package = Package(
    name: "veneer",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "veneer", targets: ["veneer"]),
        .library(name: "VeneerCore", targets: ["VeneerCore"]),
        .library(name: "VeneerHTTP1", targets: ["VeneerHTTP1"]),
        .library(name: "VeneerServer", targets: ["VeneerServer"]),
        .library(name: "VeneerConfig", targets: ["VeneerConfig"]),
        .library(name: "VeneerStores", targets: ["VeneerStores"]),
        .library(name: "VeneerDecorators", targets: ["VeneerDecorators"]),
        .library(name: "VeneerOrigins", targets: ["VeneerOrigins"]),
        .library(name: "VeneerRuntime", targets: ["VeneerRuntime"]),
    ],
    dependencies: [
        // traits: [] keeps SwiftPM from re-planning Hummingbird on every build (TOOLCHAIN.md).
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1", traits: []),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/vapor/sqlite-nio.git", from: "1.13.2"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        // Targeted cache-control fields (RFC 9213) are structured Dictionaries (RFC 8941).
        .package(url: "https://github.com/apple/swift-http-structured-headers.git", from: "1.7.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CLibYAML",
            pkgConfig: "yaml-0.1",
            providers: [.apt(["libyaml-dev"])]
        ),
        // zlib, for `record` to read a gzip- or deflate-encoded body before redacting it.
        .systemLibrary(
            name: "CZlib",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]
        ),
        .target(
            name: "VeneerCore",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
        // The HTTP/1.1 wire: parsers, the response writer, serialized fields, hop-by-hop rules,
        // the per-event-loop flush and task executor. Decorators never import it.
        .target(
            name: "VeneerHTTP1",
            dependencies: [
                "VeneerCore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: swiftSettings
        ),
        // The listener, the connection handler and the edge; the runtime plugs in its active
        // chain and admin API through small protocols.
        .target(
            name: "VeneerServer",
            dependencies: [
                "VeneerCore", "VeneerHTTP1",
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                // Quiescing for listeners on sockets systemd passes (Hummingbird's Server binds its own).
                .product(name: "NIOExtras", package: "swift-nio-extras"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "VeneerConfig",
            dependencies: [
                "CLibYAML", "VeneerCore",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "VeneerStores",
            dependencies: [
                "VeneerCore",
                .product(name: "SQLiteNIO", package: "sqlite-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "VeneerDecorators",
            dependencies: [
                // No store module: what a decorator needs of a store is the protocol in VeneerCore.
                "VeneerCore", "VeneerConfig", "CZlib",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "RawStructuredFieldValues", package: "swift-http-structured-headers"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "VeneerOrigins",
            dependencies: [
                "VeneerCore", "VeneerConfig", "VeneerHTTP1",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "VeneerRuntime",
            dependencies: [
                "VeneerCore", "VeneerConfig", "VeneerStores", "VeneerDecorators", "VeneerOrigins", "VeneerServer",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "veneer",
            dependencies: [
                "VeneerRuntime", "VeneerConfig", "VeneerCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "VeneerTestSupport",
            dependencies: [
                "VeneerCore", "VeneerConfig", "VeneerRuntime", "VeneerDecorators", "VeneerOrigins", "VeneerHTTP1", "VeneerServer",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Tests/VeneerTestSupport",
            swiftSettings: testSettings
        ),
        .testTarget(name: "VeneerCoreTests", dependencies: ["VeneerCore", "VeneerTestSupport"], swiftSettings: testSettings),
        .testTarget(name: "VeneerHTTP1Tests", dependencies: ["VeneerHTTP1", "VeneerTestSupport"], swiftSettings: testSettings),
        .testTarget(name: "VeneerServerTests", dependencies: ["VeneerServer", "VeneerTestSupport"], swiftSettings: testSettings),
        .testTarget(name: "VeneerConfigTests", dependencies: ["VeneerConfig", "VeneerTestSupport"], swiftSettings: testSettings),
        .testTarget(name: "VeneerStoresTests", dependencies: ["VeneerStores", "VeneerTestSupport"], swiftSettings: testSettings),
        .testTarget(name: "VeneerOriginsTests", dependencies: ["VeneerOrigins", "VeneerTestSupport"], swiftSettings: testSettings),
        .testTarget(name: "VeneerDecoratorsTests", dependencies: ["VeneerDecorators", "VeneerStores", "VeneerTestSupport"], swiftSettings: testSettings),
        .testTarget(name: "VeneerRuntimeTests", dependencies: ["VeneerRuntime", "VeneerTestSupport"], swiftSettings: testSettings),
        .testTarget(name: "EndToEndTests", dependencies: ["VeneerTestSupport"], swiftSettings: testSettings),
        // The fuzz targets' bodies (Fuzz/README in the README's Fuzzing section): an ordinary
        // module, so that the tests replay every corpus file through the same functions.
        .target(
            name: "VeneerFuzzing",
            dependencies: [
                "VeneerCore", "VeneerHTTP1", "VeneerConfig", "VeneerDecorators",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Fuzz/VeneerFuzzing",
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "VeneerFuzzingTests", dependencies: ["VeneerFuzzing"], swiftSettings: testSettings),
        // Examples/rate-limit: a decorator written outside Veneer, a package of its own that
        // depends on Veneer's library products (README, Writing a decorator). Its sources are
        // built and tested here too, so that make test runs them without a second build of the
        // whole graph; make test-example checks that they use public API only.
        .target(
            name: "RateLimit",
            dependencies: ["VeneerCore", "VeneerConfig"],
            path: "Examples/rate-limit/Sources/RateLimit",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RateLimitTests", dependencies: ["RateLimit", "VeneerCore", "VeneerConfig", "VeneerRuntime"],
            path: "Examples/rate-limit/Tests/RateLimitTests", swiftSettings: testSettings),
    ]
)

// `make fuzz` only (VENEER_FUZZ=1, its own scratch path): one libFuzzer executable per target,
// built with `--sanitize=fuzzer --sanitize=address`, each a few lines calling its entry in
// VeneerFuzzing. Kept out of every other build, which has no use for them.
if Context.environment["VENEER_FUZZ"] == "1" {
    for name in ["request", "response", "differential", "config", "cache-headers", "fault-header", "quantities"] {
        package.targets.append(.executableTarget(
            name: "fuzz-\(name)", dependencies: ["VeneerFuzzing"], path: "Fuzz/Targets/fuzz-\(name)", swiftSettings: swiftSettings))
        package.products.append(.executable(name: "fuzz-\(name)", targets: ["fuzz-\(name)"]))
    }
}
