// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "Strata",
    platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9)],
    products: [
        .library(name: "Strata", targets: ["Strata"]),
        .library(name: "StrataTesting", targets: ["StrataTesting"]),
        .executable(name: "strata", targets: ["strata"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.0.0"),
    ],
    targets: [
        .target(
            name: "Strata",
            dependencies: [.product(name: "Logging", package: "swift-log")]
        ),
        .target(
            name: "StrataTesting",
            dependencies: ["Strata"]
        ),
        .target(
            name: "StrataDemo",
            dependencies: [
                "Strata",
                "StrataTesting",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ],
            resources: [.copy("Resources/default_feed.json")]
        ),
        .executableTarget(
            name: "strata",
            dependencies: [
                "Strata",
                "StrataDemo",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(
            name: "StrataTests",
            dependencies: ["Strata", "StrataTesting"]
        ),
        .testTarget(
            name: "StrataIntegrationTests",
            dependencies: ["Strata", "StrataTesting", "StrataDemo"],
            resources: [.copy("Resources/default_feed.json")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
