// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "Strata",
    platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9)],
    products: [
        .library(name: "Strata", targets: ["Strata"]),
        .library(name: "StrataSQLite", targets: ["StrataSQLite"]),
        .library(name: "StrataPostgres", targets: ["StrataPostgres"]),
        .library(name: "StrataTesting", targets: ["StrataTesting"]),
        .executable(name: "strata", targets: ["strata"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.1.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.0.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.21.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.0.0"),
    ],
    targets: [
        .target(
            name: "Strata",
            dependencies: [
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        .target(
            name: "StrataSQLite",
            dependencies: [
                "Strata",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "StrataPostgres",
            dependencies: [
                "Strata",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "StrataTesting",
            dependencies: ["Strata", .product(name: "Logging", package: "swift-log")]
        ),
        .target(
            name: "StrataDemo",
            dependencies: [
                "Strata",
                "StrataTesting",
                "FeedCachingExample",
                "FileFeedStoreExample",
                "PostsRepositoryExample",
                "CrossCuttingExample",
                "DataLoaderChainExample",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ],
            resources: [.copy("Resources/default_feed.json")]
        ),
        .target(
            name: "StrataCLI",
            dependencies: [
                "Strata",
                "StrataSQLite",
                "StrataPostgres",
                "StrataDemo",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "strata",
            dependencies: ["StrataCLI", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),

        // The five source systems (SEEDS.md), each in its own article's vocabulary.
        .target(
            name: "FeedCachingExample",
            dependencies: ["Strata", .product(name: "Logging", package: "swift-log")],
            path: "Examples/S0-FeedCaching/Sources"
        ),
        .testTarget(
            name: "FeedCachingExampleTests",
            dependencies: ["FeedCachingExample", "Strata", "StrataTesting", "StrataDemo"],
            path: "Examples/S0-FeedCaching/Tests"
        ),
        .target(
            name: "FileFeedStoreExample",
            dependencies: ["Strata", "FeedCachingExample"],
            path: "Examples/S1-FileFeedStore/Sources"
        ),
        .testTarget(
            name: "FileFeedStoreExampleTests",
            dependencies: ["FileFeedStoreExample", "FeedCachingExample", "Strata", "StrataTesting"],
            path: "Examples/S1-FileFeedStore/Tests"
        ),
        .target(
            name: "PostsRepositoryExample",
            dependencies: ["Strata"],
            path: "Examples/S2-PostsRepository/Sources"
        ),
        .testTarget(
            name: "PostsRepositoryExampleTests",
            dependencies: ["PostsRepositoryExample", "Strata", "StrataTesting", "StrataDemo"],
            path: "Examples/S2-PostsRepository/Tests"
        ),
        .target(
            name: "CrossCuttingExample",
            dependencies: ["Strata", .product(name: "Logging", package: "swift-log")],
            path: "Examples/S3-CrossCutting/Sources"
        ),
        .testTarget(
            name: "CrossCuttingExampleTests",
            dependencies: ["CrossCuttingExample", "Strata", "StrataTesting"],
            path: "Examples/S3-CrossCutting/Tests"
        ),
        .target(
            name: "DataLoaderChainExample",
            dependencies: ["Strata"],
            path: "Examples/S4-DataLoaderChain/Sources",
            resources: [.copy("Resources/default_data.json")]
        ),
        .testTarget(
            name: "DataLoaderChainExampleTests",
            dependencies: ["DataLoaderChainExample", "Strata", "StrataTesting", "StrataDemo"],
            path: "Examples/S4-DataLoaderChain/Tests"
        ),

        .testTarget(
            name: "StrataTests",
            dependencies: [
                "Strata",
                "StrataTesting",
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ]
        ),
        .testTarget(
            name: "StrataSQLiteTests",
            dependencies: ["StrataSQLite", "Strata", "StrataTesting"]
        ),
        .testTarget(
            name: "StrataPostgresTests",
            dependencies: ["StrataPostgres", "Strata", "StrataTesting"]
        ),
        // A helper process the crash-safety tests start and kill with SIGKILL while it writes.
        .executableTarget(
            name: "strata-crash-writer",
            dependencies: ["Strata", "StrataSQLite"],
            path: "Tests/CrashWriter"
        ),
        .testTarget(
            name: "StrataIntegrationTests",
            dependencies: [
                "Strata", "StrataSQLite", "StrataTesting", "StrataDemo", "StrataCLI", "strata", "strata-crash-writer",
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ],
            resources: [.copy("Resources/default_feed.json")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
