// swift-tools-version: 6.1
import PackageDescription

// A decorator written outside Veneer: it depends on Veneer's library products and nothing else.
// Veneer's own `make test` builds and tests these sources too (as targets of its package) and
// checks that they use nothing but Veneer's public API; `.ci/run` builds this package as it is.
let package = Package(
    name: "rate-limit",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "RateLimit", targets: ["RateLimit"]),
    ],
    dependencies: [
        // Where Veneer is: a path here; a URL and a version elsewhere.
        .package(name: "veneer", path: "../.."),
    ],
    targets: [
        .target(
            name: "RateLimit",
            dependencies: [
                .product(name: "VeneerCore", package: "veneer"),
                .product(name: "VeneerConfig", package: "veneer"),
            ]
        ),
        .testTarget(
            name: "RateLimitTests",
            dependencies: [
                "RateLimit",
                .product(name: "VeneerCore", package: "veneer"),
                .product(name: "VeneerConfig", package: "veneer"),
                .product(name: "VeneerRuntime", package: "veneer"),
            ]
        ),
    ]
)
