// swift-tools-version:6.0
import PackageDescription
let package = Package(
    name: "floor",
    dependencies: [.package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2")],
    targets: [.executableTarget(name: "floor", dependencies: [
        .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio")])]
)
